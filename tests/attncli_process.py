"""`attncli` as a user runs it: a subprocess of `python -m attncli` from this checkout."""

import os
import sys
from pathlib import Path

from process_watch import run

REPO = Path(__file__).resolve().parents[1]


def attncli(*args, cwd, stdin=None, check=True):
    """Run `python -m attncli ARGS` in `cwd`, waiting as long as it works
    (`process_watch`); with `check`, fail unless it exits 0."""
    # Piped, as a user's shell pipes it: no COLUMNS or LINES (pytest-xdist's workers have
    # COLUMNS=80 and LINES=24, which would lay the tables out for an 80-column terminal).
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    env.update(PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    result = run([sys.executable, "-m", "attncli", *map(str, args)], cwd=cwd, input=stdin,
                 env=env)
    if check and result.returncode != 0:
        raise AssertionError(
            f"attncli {' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr}"
        )
    return result


FIXTURE_RUN = REPO / "tests" / "fixtures" / "run-0.1.0"


def fixture_run(directory):
    """A copy of `tests/fixtures/run-0.1.0` (a small trained word-level run) as
    `directory/run`, for a test to use and change."""
    import shutil

    run = Path(directory) / "run"
    shutil.copytree(FIXTURE_RUN, run)
    return run
