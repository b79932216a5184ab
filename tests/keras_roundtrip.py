"""Save a model as `.keras`, reload it in a fresh Python process, and run it there.

A fresh process proves the file alone suffices: the layers are found through their
registration (`import layers`), not through objects left over in the test's memory.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]

_RELOAD_AND_RUN = """
import sys
import numpy as np
import keras
import layers  # registers the attncli layers with Keras

model = keras.saving.load_model(sys.argv[1])
arrays = np.load(sys.argv[2])
inputs = [arrays[f"arr_{i}"] for i in range(len(arrays.files))]
outputs = model(inputs if len(inputs) > 1 else inputs[0], training=False)
if not isinstance(outputs, (list, tuple)):
    outputs = [outputs]
np.savez(sys.argv[3], *[keras.ops.convert_to_numpy(o) for o in outputs])
"""


def outputs_in_fresh_process(model, inputs, tmp_path):
    """Outputs of `model` on `inputs` (a list of arrays) after a reload elsewhere."""
    model_path = tmp_path / "model.keras"
    model.save(model_path)
    np.savez(tmp_path / "inputs.npz", *inputs)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-c", _RELOAD_AND_RUN, str(model_path),
         str(tmp_path / "inputs.npz"), str(tmp_path / "outputs.npz")],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = np.load(tmp_path / "outputs.npz")
    return [outputs[f"arr_{i}"] for i in range(len(outputs.files))]
