"""The weights a run started from another run's kept model (`attncli train --init-from`,
`attncli.training.init_from`) begins with, and what starts fresh."""

from attncli.errors import AttncliError
from attncli.model.saving import (
    ModelFileError, inner_path, load_matching_weights, load_weights, read_model_config,
)
from attncli.training.init_from import gains_alignment_layer, grows_into_cascade


def load_initial_weights(model, init_from, progress):
    """Load the weights of `init_from`'s kept model into `model` (same architecture,
    or a recurrent encoder grown into a cascade, as `check_init_from` checked), and
    say what starts fresh."""
    advice = ("the file is missing, damaged or belongs to another model; give another "
              "--init-from, or start again with --overwrite")
    init_from.check_unchanged()
    try:
        kept = read_model_config(init_from.model_dir)["model"]
    except ModelFileError as error:
        raise AttncliError(
            f"--init-from: {error}; put RUN's kept model back, or start again with "
            "--overwrite"
        ) from None
    taken = "its weights and vocabularies"
    grown = [change for change, made in (
        ("its recurrent encoder grown into a cascade", grows_into_cascade(kept, model.config)),
        ("an alignment layer added", gains_alignment_layer(kept, model.config)),
    ) if made]
    if grown:
        fresh = load_matching_weights(model, kept, init_from.weights_path, advice,
                                      error=AttncliError)
        taken = (f"its vocabularies and {len(model.weights) - len(fresh)} of the "
                 f"{len(model.weights)} weights, {' and '.join(grown)}; fresh: "
                 f"{', '.join(fresh_parts(model, fresh))}")
    else:
        load_weights(model, init_from.weights_path, advice, error=AttncliError)
    progress.message(
        f"initialised from {init_from.describe()}: {taken}; the optimizer starts fresh "
        "and the learning-rate schedule at step 0"
    )


def fresh_parts(model, fresh):
    """The names of `fresh` (variable paths below the model's name) for a person: a layer
    (`encoder/block_0`) where all its variables are fresh, else the variables."""
    layers = {}
    for variable in model.weights:
        path = inner_path(variable)
        layers.setdefault(_layer_of(path), []).append(path)
    unset = set(fresh)
    parts = []
    for path in fresh:
        whole = all(other in unset for other in layers[_layer_of(path)])
        parts.append(_layer_of(path) if whole else path)
    return list(dict.fromkeys(parts))


def _layer_of(path):
    """`encoder/block_0/W_1/kernel` -> `encoder/block_0`."""
    return "/".join(path.split("/")[:2])
