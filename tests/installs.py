"""What a test does when something it needs from outside pip is not installed.

The real CLIs (`tests/clients/`, from npm) and Chromium (`tests/browser/`, from Debian) are
installed by `.ci/run`, not by `pip install -e '.[test]'`. Without them those tests skip,
and the skip says which `.ci/run` line installs what is missing. With
`RUNGWAY_REQUIRE_ALL_TESTS=1` (`.ci/run` sets it) the skip is a failure instead, so a run
in CI can never pass by skipping them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

REQUIRE_ALL_ENV = "RUNGWAY_REQUIRE_ALL_TESTS"
CI_RUN = Path(__file__).resolve().parents[1] / ".ci" / "run"


def ci_step(containing: str) -> str:
    """The command in `.ci/run` whose first line contains `containing`, continuation lines
    joined, so that a message quotes the pinned install exactly as CI runs it."""
    try:
        lines = CI_RUN.read_text().splitlines()
    except OSError:
        return f"the step of .ci/run with {containing!r}"
    for start, line in enumerate(lines):
        if containing in line and not line.lstrip().startswith("#"):
            command = [line.strip()]
            following = iter(lines[start + 1 :])
            while command[-1].endswith("\\"):
                command[-1] = command[-1].removesuffix("\\").rstrip()
                command.append(next(following, "").strip())
            return " ".join(command)
    return f"the step of .ci/run with {containing!r}"


def not_installed(what: str, how: str) -> NoReturn:
    """Skip the running test because `what` is missing, saying `how` to install it; fail it
    instead when every test must run."""
    message = f"{what}; to install it: {how}"
    if os.environ.get(REQUIRE_ALL_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ALL_ENV}=1: no test may be skipped)", pytrace=False)
    pytest.skip(message)
