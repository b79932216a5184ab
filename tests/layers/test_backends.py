"""The layer contract and the masking tests on Keras's other backends, JAX and PyTorch.

The suite runs on TensorFlow. Keras chooses its backend once, when it is imported, so
each other backend gets a fresh process: pytest on tests/layers/test_layer_contract.py and
tests/layers/test_masking.py with `KERAS_BACKEND` set, and TensorFlow unimportable: on another
backend neither the layers nor these tests may need it.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BACKEND_TESTS = ["tests/layers/test_layer_contract.py", "tests/layers/test_masking.py"]

# Nothing here may import TensorFlow on another backend: it is made unimportable, as
# for a user who has only JAX or PyTorch installed (Keras then treats it as absent).
_RUN_PYTEST_WITHOUT_TENSORFLOW = """
import sys
import pytest
sys.modules["tensorflow"] = None
sys.exit(pytest.main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_contract_and_masking_pass_on_backend(backend, tmp_path):
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    if backend == "jax":
        # XLA compiles every operation of these small eager calls once; without its
        # optimisation passes the compiling takes about a third less time.
        env.setdefault("JAX_PLATFORMS", "cpu")
        env.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
        # Every compiled operation is also written to disk, so that the fresh process of
        # the `.keras` round trip reads the ones it shares with the tests instead of
        # compiling them again (its outputs still come from the files alone).
        env.update(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax-compiled"),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    result = subprocess.run(
        [sys.executable, "-c", _RUN_PYTEST_WITHOUT_TENSORFLOW,
         "-q", "-p", "no:cacheprovider", *BACKEND_TESTS],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True,
    )
    report = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert " passed" in report, report
