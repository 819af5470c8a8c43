"""schemathesis against a live server's ``/openapi.json`` with ``--checks all``: every operation, ``examples``
generated cases each, positive and negative: no 5xx; status, headers, content type and body as described; a
schema-valid body accepted, a schema-violating one refused; an undeclared method a 405 with ``Allow``. What JSON
Schema cannot say (two lists of one length, a request's tokens) is configured in ``schemathesis.toml`` beside this
file. Returns the failures as text (empty: the contract holds)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

CONFIG = Path(__file__).with_name("schemathesis.toml")


def check_contract(url: str, examples: int = 30, seed: int = 1) -> list[str]:
    import tempfile

    cli = Path(sys.executable).with_name("schemathesis")
    with tempfile.TemporaryDirectory() as work:  # its cache (.schemathesis/) stays out of the checkout
        run = subprocess.run([str(cli), "--config-file", str(CONFIG), "run", f"{url}/openapi.json", "--checks", "all",
                              "--max-examples", str(examples), "--seed", str(seed), "--no-color"],
                             capture_output=True, text=True, timeout=900, cwd=work)
    out = run.stdout + run.stderr
    operations = re.search(r"Operations:\s+(\d+) selected", out)
    assert operations and int(operations.group(1)) >= 10, out[-3000:]
    return [] if run.returncode == 0 else [out[out.find("FAILURES"):][:6000] if "FAILURES" in out else out[-6000:]]
