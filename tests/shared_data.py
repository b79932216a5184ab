"""Where the real corpora are: `../shared/data` beside the repository, or $ATTNCLI_SHARED_DATA.

A test that needs them and cannot find them skips on a workstation and fails under CI.
"""

import os
from pathlib import Path

import pytest


def shared_data(relative: str) -> Path:
    """The path of `relative` inside the shared data folder."""
    roots = [Path(__file__).resolve().parents[1].parent / "shared" / "data"]
    if os.environ.get("ATTNCLI_SHARED_DATA"):
        roots.insert(0, Path(os.environ["ATTNCLI_SHARED_DATA"]))
    for root in roots:
        if (root / relative).exists():
            return root / relative
    message = f"shared data {relative} not found under {', '.join(map(str, roots))}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
