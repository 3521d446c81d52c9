"""The adapter contract is light: importing it loads neither the config nor the credential
store, so neither YAML nor cryptography comes with it."""

from __future__ import annotations

import subprocess
import sys

# A fresh interpreter: this test process has long since imported everything.
LOADED_BY_THE_CONTRACT = """
import sys
import rungway.adapters.base
print(" ".join(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_the_adapter_contract_loads_neither_yaml_nor_cryptography() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOADED_BY_THE_CONTRACT],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = set(done.stdout.split())
    assert "rungway" in loaded
    assert not loaded & {"yaml", "cryptography"}
