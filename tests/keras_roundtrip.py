"""Save models as `.keras`, reload them in a fresh Python process, and run them there.

A fresh process proves the file alone suffices: the layers are found through their
registration (`from layers import *` loads them all), not through objects left over in
the test's memory.
The process runs on the Keras backend of the caller's environment (`KERAS_BACKEND`).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]

_RELOAD_AND_RUN = """
import json
import sys
import numpy as np
import keras
from layers import *  # noqa: F403 -- loads and registers every attncli layer with Keras

for model_path, inputs_path, outputs_path in json.loads(sys.argv[1]):
    model = keras.saving.load_model(model_path)
    arrays = np.load(inputs_path)
    inputs = [arrays[f"arr_{i}"] for i in range(len(arrays.files))]
    outputs = model(inputs, training=False)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    np.savez(outputs_path, *[keras.ops.convert_to_numpy(o) for o in outputs])
"""


def outputs_in_fresh_process(models, directory):
    """Reload `{name: (model, inputs)}` in one fresh process: `{name: outputs}`.

    `inputs` is the list of arrays the model takes (a list even for one input);
    `outputs` the list of arrays the reloaded model returns on it (called with
    `training=False`).
    """
    directory = Path(directory)
    jobs = []
    for name, (model, inputs) in models.items():
        paths = [str(directory / f"{name}.{ending}")
                 for ending in ("keras", "inputs.npz", "outputs.npz")]
        model.save(paths[0])
        np.savez(paths[1], *inputs)
        jobs.append(paths)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND=keras.backend.backend())
    result = subprocess.run(
        [sys.executable, "-c", _RELOAD_AND_RUN, json.dumps(jobs)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reloaded = {}
    for name, (_, _, outputs_path) in zip(models, jobs):
        outputs = np.load(outputs_path)
        reloaded[name] = [outputs[f"arr_{i}"] for i in range(len(outputs.files))]
    return reloaded
