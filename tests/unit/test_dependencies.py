"""The package runs on its declared dependencies: nothing in it needs the test extra."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"
# Every module is imported, and none may fail, with the test extra's own modules absent.
IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
for name in sys.argv[1:]:
    sys.modules[name] = None
import rungway
for module in pkgutil.walk_packages(rungway.__path__, "rungway."):
    if not module.name.endswith("__main__"):
        importlib.import_module(module.name)
"""


def _distribution(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _test_only_modules() -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    runtime = {_distribution(requirement) for requirement in project["dependencies"]}
    test = {_distribution(requirement) for requirement in project["optional-dependencies"]["test"]}
    only = test - runtime
    return sorted(
        module
        for module, distributions in importlib.metadata.packages_distributions().items()
        if any(_distribution(distribution) in only for distribution in distributions)
    )


def test_every_module_imports_without_the_test_extra() -> None:
    blocked = _test_only_modules()
    assert "httpx" in blocked
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERY_MODULE, *blocked],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
