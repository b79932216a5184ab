"""attncli's own `layers` package, and the one-line error when another module shadows it.

The founding design lays the repository out with `layers/` as a top-level package, so
users write `from layers import LuongAttention`. Many Keras projects have a `layers.py`
of their own; run from such a folder (`python -m attncli ...`), Python would import that
file in place of ours and the model would fail far from the cause. `check_own_layers`
finds out first, without importing anything.
"""

import importlib.util
import sys
from pathlib import Path

from attncli.errors import AttncliError

OWN_LAYERS = Path(__file__).resolve().parent.parent / "layers"


def check_own_layers():
    """Raise `AttncliError` unless `import layers` finds attncli's own package."""
    try:
        spec = importlib.util.find_spec("layers")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise AttncliError(
            f"attncli's package 'layers' is missing (expected at {OWN_LAYERS}); "
            "reinstall attncli"
        )
    found = _location(spec)
    if found is None or found.resolve() != OWN_LAYERS:
        raise AttncliError(
            f"{found or spec.name} shadows attncli's own package 'layers' (Python finds it "
            f"first on its path); run attncli from another folder, or rename that module"
        )


def exit_if_shadowed():
    """`check_own_layers`, its refusal said as every user error is (one `Error:` line on
    stderr, exit code 2), for the command line to run before its modules load: they
    import `layers` (its registry of scores) as they load, before any command runs."""
    try:
        check_own_layers()
    except AttncliError as error:
        print(f"Error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _location(spec):
    """The folder of a package, or the file of a module (None if it has neither)."""
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    if spec.origin and spec.origin not in ("built-in", "frozen", "namespace"):
        return Path(spec.origin)
    return None
