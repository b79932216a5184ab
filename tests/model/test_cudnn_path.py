"""The recurrences' two paths: our graph loop, and Keras's GRU/LSTM layers (cuDNN on a GPU).

`implementation="keras"` runs each recurrence with `keras.layers.GRU` (reset-after) or
`LSTM` fed the cells' own weights (`attncli.model.recurrent.keras_layer`), the layers
whose TensorFlow backend runs cuDNN's kernels where a GPU is present. This machine has
none, so Keras runs its generic loop, the same equations as cuDNN's; what is checked
here is that the switch itself is exact: the same weights give the same outputs, final
states and gradients of every weight on both paths, for GRU and LSTM, one and two
layers, one and two directions, with right-padded sentences of every length and one
of none (cuDNN refuses a row with no step; `run_keras` gives it one and then its
initial state). And that `"auto"` takes Keras's layers only while training on a GPU.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from attncli.model import recurrent
from attncli.model.encoder import Encoder
from attncli.model.cells import GRUCell, LSTMCell
from attncli.training.builder import dtype_policy
from small_models import REAL, SOURCE, TARGET_IN, small_model

# Right-padded; row 2 has no real step.
SOURCES = np.array([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0], [0, 0, 0, 0, 0], [13, 0, 0, 0, 0]],
                   dtype="int32")

ENCODERS = [
    dict(num_layers=1, bidirectional=True, merge_mode="sum"),
    dict(num_layers=2, bidirectional=True, merge_mode="concat"),
    dict(num_layers=2, bidirectional=False),
]


def encoder_ids(options):
    directions = f"bi-{options['merge_mode']}" if options["bidirectional"] else "uni"
    return f"{options['num_layers']}-layers-{directions}"


def make_encoder(cell, implementation, options, policy="float32"):
    keras.utils.set_random_seed(1)
    with dtype_policy(policy):
        encoder = Encoder(20, 6, 4, cell, implementation=implementation, **options)
    encoder.build()
    return encoder


def outputs_and_gradients(layer, run):
    """`run(layer)`'s tensors and the gradients of every weight of a loss on all of them."""
    rng = np.random.default_rng(2)
    with tf.GradientTape() as tape:
        tensors = run(layer)
        loss = tf.add_n([tf.reduce_sum(t * rng.normal(size=t.shape)) for t in tensors])
    gradients = tape.gradient(loss, layer.trainable_variables)
    return ([t.numpy() for t in tensors],
            [tf.convert_to_tensor(g).numpy() for g in gradients])


@pytest.mark.parametrize("options", ENCODERS, ids=encoder_ids)
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_encoder_keras_layers_equal_the_loop(cell, options):
    loop = make_encoder(cell, "loop", options)
    layers = make_encoder(cell, "keras", options)
    layers.set_weights(loop.get_weights())

    def run(encoder):
        outputs, final_state, _ = encoder(SOURCES, training=True)
        return [outputs, *final_state]

    expected, expected_gradients = outputs_and_gradients(loop, run)
    tensors, gradients = outputs_and_gradients(layers, run)
    assert len(layers.weights) == len(loop.weights)
    for tensor, reference in zip(tensors, expected):
        np.testing.assert_allclose(tensor, reference, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(tensors[0][SOURCES == 0], 0.0)
    # the row with no step keeps the initial state, zeros
    for final in tensors[1:]:
        np.testing.assert_array_equal(final[2], 0.0)
    for variable, gradient, reference in zip(layers.trainable_variables, gradients,
                                             expected_gradients):
        assert np.any(reference != 0.0), variable.path
        np.testing.assert_allclose(gradient, reference, rtol=1e-5, atol=1e-6,
                                   err_msg=variable.path)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_luong_decoder_keras_layer_equals_the_loop(cell):
    """The whole model, encoder and Luong's decoder over the whole target, both paths."""
    loop = small_model(cell=cell, score="general")
    layers = small_model(cell=cell, score="general")
    layers.set_weights(loop.get_weights())
    layers.encoder.implementation = layers.decoder.implementation = "keras"
    ran = []

    def run(model):
        logits = model((SOURCE, TARGET_IN), training=True)
        return [tf.boolean_mask(logits, REAL)]

    expected, expected_gradients = outputs_and_gradients(loop, run)
    original = recurrent.run_keras
    try:
        recurrent.run_keras = lambda *args: ran.append(args[0].name) or original(*args)
        tensors, gradients = outputs_and_gradients(layers, run)
    finally:
        recurrent.run_keras = original
    assert f"{cell}_cell" in ran and "layer_0_forward" in ran and "layer_0_backward" in ran
    np.testing.assert_allclose(tensors[0], expected[0], rtol=1e-5, atol=1e-5)
    # float32's rounding, summed in another order through the whole model
    scale = max(np.abs(g).max() for g in expected_gradients)
    for variable, gradient, reference in zip(layers.trainable_variables, gradients,
                                             expected_gradients):
        np.testing.assert_allclose(gradient, reference, rtol=1e-4, atol=1e-6 * scale,
                                   err_msg=variable.path)


@pytest.mark.parametrize("cell_class", [GRUCell, LSTMCell])
def test_keras_layer_reads_the_cells_weights_and_has_none_of_its_own(cell_class):
    cell = cell_class(3, name="cell")
    cell.build((None, 5))
    layer = recurrent.keras_layer(cell)
    assert layer.cell.kernel is cell.kernel
    assert layer.cell.recurrent_kernel is cell.recurrent_kernel
    if cell_class is GRUCell:
        assert layer.cell.reset_after
        np.testing.assert_array_equal(
            layer.cell.bias, np.stack([cell.bias.numpy(), cell.recurrent_bias.numpy()])
        )
    else:
        assert layer.cell.bias is cell.bias
    layer(tf.zeros((2, 4, 5)), initial_state=list(cell.initial_state(2)))
    assert {id(w) for w in layer.weights} <= {id(w) for w in cell.weights}


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_keras_layers_run_under_mixed_policies(cell, policy):
    """Keras computes the states in the half type too, so the paths agree within it."""
    options = ENCODERS[1]
    loop = make_encoder(cell, "loop", options, policy)
    layers = make_encoder(cell, "keras", options, policy)
    layers.set_weights(loop.get_weights())
    (outputs, final, _), (expected, expected_final, _) = layers(SOURCES), loop(SOURCES)
    half = policy.removeprefix("mixed_")
    assert outputs.dtype == half and {s.dtype.name for s in final} == {"float32"}
    tolerance = {"bfloat16": 2.0**-8, "float16": 2.0**-11}[half] * 4
    scale = np.abs(np.asarray(expected, "float32")).max()
    np.testing.assert_allclose(np.asarray(outputs, "float32") / scale,
                               np.asarray(expected, "float32") / scale, atol=tolerance)
    assert len(final) == len(expected_final)
    for state, expected_state in zip(final, expected_final):
        scale = np.abs(np.asarray(expected_state)).max()
        np.testing.assert_allclose(np.asarray(state) / scale, np.asarray(expected_state) / scale,
                                   atol=tolerance)


def test_auto_takes_keras_layers_only_while_training_on_a_gpu(monkeypatch):
    assert not recurrent.uses_keras_layers("auto", True)  # no GPU here
    assert recurrent.uses_keras_layers("keras", False)
    assert not recurrent.uses_keras_layers("loop", True)
    monkeypatch.setattr(tf.config, "list_logical_devices",
                        lambda kind=None: ["GPU:0"] if kind == "GPU" else [])
    assert recurrent.uses_keras_layers("auto", True)
    assert recurrent.uses_keras_layers("auto", True, "float16")
    assert not recurrent.uses_keras_layers("auto", True, "bfloat16")
    # validation, search and the export keep a graph that runs on any device
    assert not recurrent.uses_keras_layers("auto", False)
    assert not recurrent.uses_keras_layers("auto", None)
    # an encoder asks with its training flag and compute dtype
    asked = []
    monkeypatch.setattr(recurrent, "uses_keras_layers", lambda *args: asked.append(args))
    make_encoder("gru", "auto", ENCODERS[0], "mixed_float16")(SOURCES, training=True)
    assert asked[-1] == ("auto", True, "float16")


def test_implementation_is_validated_and_kept_in_the_config():
    with pytest.raises(ValueError, match="Received: implementation='cudnn'"):
        Encoder(20, 6, 4, "gru", implementation="cudnn")
    model = small_model(score="dot")
    with pytest.raises(ValueError, match="Received: implementation='fast'"):
        type(model.decoder)(**{**model.decoder.get_config(), "implementation": "fast"})
    encoder = make_encoder("lstm", "keras", ENCODERS[0])
    assert Encoder.from_config(encoder.get_config()).implementation == "keras"
    assert model.encoder.get_config()["implementation"] == "auto"
    assert model.decoder.get_config()["implementation"] == "auto"
