"""The package runs on its declared dependencies: nothing in it needs the test extra."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"
# Every module is imported with the modules of the test extra and the optional extras
# absent. None may fail, except by an ImportError that names the extra to install; the
# names of those are printed, one a line.
IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
for name in sys.argv[1:]:
    sys.modules[name] = None
import rungway
for module in pkgutil.walk_packages(rungway.__path__, "rungway."):
    if not module.name.endswith("__main__"):
        try:
            importlib.import_module(module.name)
        except ImportError as error:
            if "pip install 'rungway[" not in str(error):
                raise
            print(module.name)
"""
NEEDS_AN_EXTRA = ("rungway.whatif.oracle", "rungway.whatif.plot")
"""The only modules that may need an optional extra: the what-if oracle (`whatif`) and its
plot (`plot`). Everything else, the CLI that offers them included, runs bare."""


def _distribution(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _test_only_modules() -> list[str]:
    """The modules of every distribution an extra adds to the runtime dependencies."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    runtime = {_distribution(requirement) for requirement in project["dependencies"]}
    extras = {
        _distribution(requirement)
        for requirements in project["optional-dependencies"].values()
        for requirement in requirements
    }
    only = extras - runtime
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
    needing = done.stdout.split()
    assert all(name.startswith(NEEDS_AN_EXTRA) for name in needing), needing
