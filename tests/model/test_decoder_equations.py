"""Each decoder against a NumPy reference of its paper's equations (tests/numpy_decoders.py).

Every weight is first set to random values (biases, LayerNorm and all), so no term of
the equations hides behind a zero or a one. All three ways the model decodes are
compared with the reference: `model(...)` (the whole-target path: Luong's batched
attention without input feeding, the graph loop otherwise), `features(stepwise=True)`
(the graph loop of `step`) and `decode_step` called once per token (what search calls).
"""

import keras
import numpy as np
import pytest
from numpy_decoders import reference_decode
from small_models import REAL, SOURCE, TARGET_IN, as_numpy, step_by_step, teacher_forced

from attncli.config.model import ModelConfig
from attncli.model.encoder_decoder import Seq2Seq

DECODERS = {
    "bahdanau": dict(decoder="bahdanau"),
    "luong": dict(decoder="luong", input_feeding=False),
    "luong+feeding": dict(decoder="luong", input_feeding=True),
}
SCORES = ("dot", "scaled_dot", "general", "concat", "additive")
VARIANTS = {
    f"{name}-{score}": dict(options, score=score)
    for name, options in DECODERS.items() for score in SCORES
}
VARIANTS.update({
    "bahdanau-lstm-additive": dict(decoder="bahdanau", score="additive", cell="lstm"),
    "luong-lstm-general": dict(decoder="luong", score="general", cell="lstm"),
    "luong+feeding-lstm-concat": dict(
        decoder="luong", input_feeding=True, score="concat", cell="lstm"
    ),
    "bahdanau-concat-memory-zeros": dict(
        decoder="bahdanau", score="additive", merge_mode="concat", bridge="zeros"
    ),
    "luong+feeding-concat-memory": dict(
        decoder="luong", input_feeding=True, score="general", merge_mode="concat"
    ),
})


def randomised_model(options, seed=7):
    """A small model whose every weight is drawn from N(0, 0.5²)."""
    keras.utils.set_random_seed(seed)
    model = Seq2Seq(ModelConfig(
        source_vocab_size=20, target_vocab_size=15, embedding_dim=6, units=8,
        attention_units=5, **options,
    ))
    rng = np.random.default_rng(seed)
    model.set_weights([
        rng.normal(scale=0.5, size=weight.shape).astype("float32") for weight in model.weights
    ])
    return model


def model_paths(model):
    """`{path: (logits, weights)}` of every way the model decodes a teacher-forced batch."""
    features, stepwise_weights = model.features((SOURCE, TARGET_IN), stepwise=True)
    return {
        "call": teacher_forced(model),
        "stepwise": (as_numpy(model.decoder.output_layer(features)), as_numpy(stepwise_weights)),
        "decode_step": step_by_step(model),
    }


@pytest.mark.parametrize("options", VARIANTS.values(), ids=VARIANTS.keys())
def test_decoder_follows_its_papers_equations(options):
    model = randomised_model(options)
    annotations, final_state, _ = model.encoder(SOURCE)
    expected = reference_decode(
        model, SOURCE, TARGET_IN, as_numpy(annotations), [as_numpy(s) for s in final_state]
    )
    for path, (logits, weights) in model_paths(model).items():
        np.testing.assert_allclose(
            weights[REAL], expected["weights"][REAL], rtol=1e-4, atol=1e-6, err_msg=path
        )
        np.testing.assert_allclose(
            logits[REAL], expected["logits"][REAL], rtol=1e-4, atol=1e-5, err_msg=path
        )

