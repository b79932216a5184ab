"""The contract every layer of `layers/` keeps, checked on each of them.

In the manner of Keras's `run_layer_test`: one list of layers, `SPECS`, and one test
per property, run over every entry:

- `get_config` returns every constructor argument, `from_config` rebuilds the layer,
  and the rebuilt layer with the same weights gives the same outputs;
- a model around the layer saved as `.keras` reloads in a fresh process and gives
  identical outputs there;
- Keras masks from `Embedding(mask_zero=True)` upstream reach the layer (the same
  result as passing the masks by hand) and the output carries the query's mask on;
- masked keys get weight exactly 0, a query with no valid key and a padded query get
  a zero output; masks, key masks and valid lengths agree and combine with AND;
- dropout acts only while training, scales the kept weights by `1 / (1 - rate)`, and
  is reproducible by its seed;
- the record of `return_steps=True` holds what the call computed: its output and
  weights, each head's projections, the softmax of its scores over its mask;
- gradients reach every trainable weight and every float input;
- float16 and bfloat16 (pure and mixed policies) give no NaN and the float32 result
  within their precision.

Adding a layer is one `LayerSpec` in `SPECS`, with the kind of inputs it is called on:
`CrossAttentionInputs` (`layer([query, value, key], mask=[...])`),
`SelfAttentionInputs` (`layer(x, mask=...)`), `TokenInputs` (`layer(ids)`), or a new
class with the same methods. The module uses `keras.ops` only, so it runs on every
Keras backend: tests/layers/test_backends.py runs it under JAX and PyTorch.
"""

from dataclasses import dataclass, field

import keras
import numpy as np
import pytest
from keras import ops

from backend_gradients import gradients
from keras_roundtrip import outputs_in_fresh_process
from layers import (
    BahdanauAttention,
    DotProductAttention,
    LuongAttention,
    MultiHeadAttention,
    PositionalEmbedding,
    ScaledDotSelfAttention,
)
from numpy_attention import lengths_to_mask, reference_softmax

BATCH = 3
VOCAB = 20


def numpy_of(tensor):
    return None if tensor is None else ops.convert_to_numpy(ops.cast(tensor, "float32"))


def ids_with_lengths(rng, lengths, maxlen):
    """Token ids `(len(lengths), maxlen)` in `1 .. VOCAB-1`, 0 (padding) past each length."""
    ids = rng.integers(1, VOCAB, size=(len(lengths), maxlen))
    return (ids * lengths_to_mask(lengths, maxlen)).astype("int32")


def outputs_of(model, inputs, **kwargs):
    """The model's outputs on the list `inputs`, always as a list."""
    outputs = model(inputs, **kwargs)
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


class MaskOf(keras.layers.Layer):
    """The Keras mask that reaches this layer, as float32 `(batch_size, T)`; ones where
    no mask arrives."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if mask is None:
            return ops.ones(ops.shape(inputs)[:-1])
        return ops.cast(mask, "float32")

    def compute_mask(self, inputs, mask=None):
        return None


class CrossAttentionInputs:
    """`layer([query, value, key], mask=[query_mask, value_mask],
    return_attention_scores=True)`, the call of every `BaseAttention`.

    Row 0 has no padding; row 1 has padded queries and keys; row 2 has no valid key.
    """

    float_names = ("query", "values", "keys")
    query_lengths = (4, 2, 4)
    key_lengths = (7, 4, 0)

    def __init__(self, query_dim=5, key_dim=6, value_dim=3, num_queries=4, num_keys=7):
        self.query_dim, self.key_dim, self.value_dim = query_dim, key_dim, value_dim
        self.num_queries, self.num_keys = num_queries, num_keys

    def arrays(self, seed=0):
        rng = np.random.default_rng(seed)
        shapes = {
            "query": (BATCH, self.num_queries, self.query_dim),
            "values": (BATCH, self.num_keys, self.value_dim),
            "keys": (BATCH, self.num_keys, self.key_dim),
        }
        arrays = {name: rng.normal(size=shape).astype("float32")
                  for name, shape in shapes.items()}
        arrays["query_mask"] = lengths_to_mask(self.query_lengths, self.num_queries)
        arrays["value_mask"] = lengths_to_mask(self.key_lengths, self.num_keys)
        return arrays

    def call(self, layer, arrays, **kwargs):
        """`(output, weights)`; `mask` in kwargs replaces the arrays' masks."""
        kwargs.setdefault("mask", [arrays["query_mask"], arrays["value_mask"]])
        return layer([arrays["query"], arrays["values"], arrays["keys"]],
                     return_attention_scores=True, **kwargs)

    def record(self, layer, arrays, **kwargs):
        """`(output, record)` of the call with `return_steps=True`."""
        return layer([arrays["query"], arrays["values"], arrays["keys"]],
                     mask=[arrays["query_mask"], arrays["value_mask"]], return_steps=True,
                     **kwargs)

    def inputs(self, arrays):
        """`(query input, key input, value input)` of the call."""
        return arrays["query"], arrays["keys"], arrays["values"]

    def allowed(self, arrays):
        """`(batch_size, Tq, Tv)`: the keys each query may give weight to."""
        shape = (BATCH, self.num_queries, self.num_keys)
        return np.broadcast_to(arrays["value_mask"][:, None, :], shape)

    def output_mask(self, arrays):
        return arrays["query_mask"]

    def equivalent_calls(self, arrays):
        """Pairs of call arguments that must give identical results: a key mask and
        valid lengths act as the value mask, and masks combine with AND."""
        query_mask, value_mask = arrays["query_mask"], arrays["value_mask"]
        other = np.ones_like(value_mask)
        other[:, 1] = False
        lengths = value_mask.sum(-1)
        return [
            ({"mask": [query_mask, None], "valid_lengths": lengths},
             {"mask": [query_mask, value_mask]}),
            ({"mask": [query_mask, None, value_mask]}, {"mask": [query_mask, value_mask]}),
            ({"mask": [query_mask, value_mask, other]},
             {"mask": [query_mask, value_mask & other]}),
            ({"mask": [query_mask, other], "valid_lengths": lengths},
             {"mask": [query_mask, value_mask & other]}),
        ]

    def ids(self, seed=0):
        rng = np.random.default_rng(seed)
        return [ids_with_lengths(rng, self.query_lengths, self.num_queries),
                ids_with_lengths(rng, self.key_lengths, self.num_keys)]

    def model(self, layer, call_kwargs):
        """Target and source ids through `Embedding(mask_zero=True)` into the layer;
        outputs `[output, weights]`."""
        target = keras.Input((None,), dtype="int32", name="target")
        source = keras.Input((None,), dtype="int32", name="source")
        query = keras.layers.Embedding(VOCAB, self.query_dim, mask_zero=True,
                                       name="embed_query")(target)
        values = keras.layers.Embedding(VOCAB, self.value_dim, mask_zero=True,
                                        name="embed_values")(source)
        keys = keras.layers.Embedding(VOCAB, self.key_dim, mask_zero=True,
                                      name="embed_keys")(source)
        outputs = layer([query, values, keys], return_attention_scores=True, **call_kwargs)
        return keras.Model([target, source], list(outputs))

    def embedded(self, model, ids):
        """The arrays the model's layer sees, as plain arrays with explicit masks."""
        target_ids, source_ids = ids
        return {
            "query": numpy_of(model.get_layer("embed_query")(target_ids)),
            "values": numpy_of(model.get_layer("embed_values")(source_ids)),
            "keys": numpy_of(model.get_layer("embed_keys")(source_ids)),
            "query_mask": target_ids != 0,
            "value_mask": source_ids != 0,
        }


class SelfAttentionInputs:
    """`layer(x, mask=mask, return_attention_scores=True)`: a sequence attending to
    itself. Row 0 has no padding, row 1 is padded, row 2 is padding throughout."""

    float_names = ("inputs",)
    lengths = (5, 2, 0)

    def __init__(self, dim=6, length=5):
        self.dim, self.length = dim, length

    def arrays(self, seed=0):
        rng = np.random.default_rng(seed)
        return {
            "inputs": rng.normal(size=(BATCH, self.length, self.dim)).astype("float32"),
            "mask": lengths_to_mask(self.lengths, self.length),
        }

    def call(self, layer, arrays, **kwargs):
        kwargs.setdefault("mask", arrays["mask"])
        return layer(arrays["inputs"], return_attention_scores=True, **kwargs)

    def record(self, layer, arrays, **kwargs):
        return layer(arrays["inputs"], mask=arrays["mask"], return_steps=True, **kwargs)

    def inputs(self, arrays):
        return (arrays["inputs"],) * 3

    def allowed(self, arrays):
        shape = (BATCH, self.length, self.length)
        return np.broadcast_to(arrays["mask"][:, None, :], shape)

    def output_mask(self, arrays):
        return arrays["mask"]

    def equivalent_calls(self, arrays):
        mask = arrays["mask"]
        other = np.ones_like(mask)
        other[:, 1] = False
        lengths = mask.sum(-1)
        return [
            ({"mask": None, "valid_lengths": lengths}, {"mask": mask}),
            ({"mask": other, "valid_lengths": lengths}, {"mask": mask & other}),
        ]

    def ids(self, seed=0):
        return [ids_with_lengths(np.random.default_rng(seed), self.lengths, self.length)]

    def model(self, layer, call_kwargs):
        ids = keras.Input((None,), dtype="int32", name="ids")
        inputs = keras.layers.Embedding(VOCAB, self.dim, mask_zero=True, name="embed")(ids)
        outputs = layer(inputs, return_attention_scores=True, **call_kwargs)
        return keras.Model([ids], list(outputs))

    def embedded(self, model, ids):
        return {"inputs": numpy_of(model.get_layer("embed")(ids[0])), "mask": ids[0] != 0}


class TokenInputs:
    """`layer(ids)`: token ids in, with 0 the padding that `mask_zero` masks."""

    float_names = ()
    lengths = (5, 2, 0)

    def __init__(self, length=5):
        self.length = length

    def arrays(self, seed=0):
        return {"ids": self.ids(seed)[0]}

    def call(self, layer, arrays, **kwargs):
        return layer(arrays["ids"], **kwargs), None

    def output_mask(self, arrays):
        return arrays["ids"] != 0

    def equivalent_calls(self, arrays):
        return []

    def ids(self, seed=0):
        return [ids_with_lengths(np.random.default_rng(seed), self.lengths, self.length)]

    def model(self, layer, call_kwargs):
        ids = keras.Input((None,), dtype="int32", name="ids")
        return keras.Model([ids], [layer(ids, **call_kwargs)])

    def embedded(self, model, ids):
        return {"ids": ids[0]}


@dataclass(frozen=True)
class LayerSpec:
    """One layer under the contract: `layer_class(**kwargs)`, called on `inputs` with
    `call_kwargs`. `has_dropout`: the layer takes `dropout` and `seed`."""

    name: str
    layer_class: type
    kwargs: dict
    inputs: object
    call_kwargs: dict = field(default_factory=dict)
    has_dropout: bool = True

    def make(self, **overrides):
        return self.layer_class(**{**self.kwargs, **overrides})

    def call(self, layer, arrays, **kwargs):
        return self.inputs.call(layer, arrays, **{**self.call_kwargs, **kwargs})

    def record(self, layer, arrays):
        return self.inputs.record(layer, arrays, **self.call_kwargs)

    @property
    def has_weights_output(self):
        return not isinstance(self.inputs, TokenInputs)


class MultiHeadInputs(CrossAttentionInputs):
    """`CrossAttentionInputs` for a layer whose weights carry a heads axis:
    `(batch_size, num_heads, Tq, Tv)`."""

    def __init__(self, num_heads=2, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads

    def allowed(self, arrays):
        per_query = super().allowed(arrays)[:, None]
        return np.broadcast_to(per_query, (BATCH, self.num_heads, *per_query.shape[2:]))


def luong_specs():
    for score in ("dot", "general", "concat"):
        for alignment in ("global", "local-m", "local-p"):
            kwargs = {"score": score, "alignment": alignment}
            if alignment != "global":
                kwargs["window"] = 2
            if score == "concat":
                kwargs["units"] = 7
            inputs = CrossAttentionInputs(key_dim=5 if score == "dot" else 6)
            yield LayerSpec(f"luong-{score}-{alignment}", LuongAttention, kwargs, inputs)


SPECS = [
    *luong_specs(),
    LayerSpec("bahdanau", BahdanauAttention, {"units": 8}, CrossAttentionInputs()),
    LayerSpec("bahdanau-normalize", BahdanauAttention, {"units": 8, "normalize": True},
              CrossAttentionInputs()),
    LayerSpec("dot-product-scaled", DotProductAttention, {"use_scale": True},
              CrossAttentionInputs(key_dim=5)),
    LayerSpec("dot-product-unscaled", DotProductAttention, {"use_scale": False},
              CrossAttentionInputs(key_dim=5)),
    LayerSpec("scaled-dot-self-attention", ScaledDotSelfAttention,
              {"key_dim": 4, "value_dim": 3, "use_bias": True}, SelfAttentionInputs()),
    LayerSpec("scaled-dot-self-attention-causal-unscaled", ScaledDotSelfAttention,
              {"key_dim": 4, "use_scale": False}, SelfAttentionInputs(),
              call_kwargs={"use_causal_mask": True}),
    *(LayerSpec(f"multi-head-{score}", MultiHeadAttention,
                {"num_heads": 2, "key_dim": 4, "score": score,
                 **({"units": 5} if score in ("concat", "additive") else {})},
                MultiHeadInputs())
      for score in ("scaled_dot", "dot", "general", "concat", "additive")),
    LayerSpec("positional-embedding", PositionalEmbedding,
              {"vocab_size": VOCAB, "output_dim": 6, "mask_zero": True}, TokenInputs(),
              has_dropout=False),
]

every_layer = pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
every_attention_layer = pytest.mark.parametrize(
    "spec", [s for s in SPECS if s.has_weights_output], ids=lambda spec: spec.name
)
every_layer_with_dropout = pytest.mark.parametrize(
    "spec", [s for s in SPECS if s.has_dropout], ids=lambda spec: spec.name
)


def built_copy(spec, layer, arrays, **overrides):
    """A layer of `spec` with `overrides`, built and given `layer`'s weights."""
    copy = spec.make(**overrides)
    spec.call(copy, cast_floats(spec, arrays, copy.compute_dtype))
    copy.set_weights(layer.get_weights())
    return copy


def cast_floats(spec, arrays, dtype):
    return {name: ops.cast(value, dtype) if name in spec.inputs.float_names else value
            for name, value in arrays.items()}


@every_layer
def test_config_round_trip(spec):
    overrides = {"dropout": 0.25, "seed": 11} if spec.has_dropout else {}
    layer = spec.make(name="under_test", **overrides)
    config = layer.get_config()
    for key, value in {**spec.kwargs, **overrides}.items():
        assert config[key] == value, key
    clone = spec.layer_class.from_config(config)
    assert clone.get_config() == config
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is spec.layer_class and restored.get_config() == config
    arrays = spec.inputs.arrays()
    expected = spec.call(layer, arrays, training=False)
    clone = built_copy(spec, layer, arrays, **config)
    for got, want in zip(spec.call(clone, arrays, training=False), expected):
        np.testing.assert_array_equal(numpy_of(got), numpy_of(want))


# One test for all layers: each fresh process pays for importing Keras and its backend,
# so every layer's model is reloaded in the same one.
@pytest.mark.slow
def test_keras_files_reload_in_a_fresh_process_with_identical_outputs(tmp_path):
    keras.utils.set_random_seed(0)
    models = {}
    for spec in SPECS:
        overrides = {"dropout": 0.1, "seed": 5} if spec.has_dropout else {}
        model = spec.inputs.model(spec.make(name="under_test", **overrides), spec.call_kwargs)
        models[spec.name] = (model, spec.inputs.ids())
    expected = {name: [numpy_of(o) for o in outputs_of(model, ids, training=False)]
                for name, (model, ids) in models.items()}
    reloaded = outputs_in_fresh_process(models, tmp_path)
    for name, outputs in reloaded.items():
        assert len(outputs) == len(expected[name]), name
        for got, want in zip(outputs, expected[name]):
            np.testing.assert_array_equal(got.astype("float32"), want, err_msg=name)


@every_layer
def test_keras_masks_reach_the_layer_and_its_output(spec):
    layer = spec.make()
    model = spec.inputs.model(layer, spec.call_kwargs)
    model = keras.Model(model.inputs, [*model.outputs, MaskOf()(model.outputs[0])])
    ids = spec.inputs.ids()
    *got, mask = [numpy_of(o) for o in outputs_of(model, ids)]
    arrays = spec.inputs.embedded(model, ids)
    by_hand = [numpy_of(o) for o in spec.call(layer, arrays) if o is not None]
    for got_one, by_hand_one in zip(got, by_hand):
        np.testing.assert_allclose(got_one, by_hand_one, atol=1e-6)
    np.testing.assert_array_equal(mask, spec.inputs.output_mask(arrays))
    if spec.inputs.equivalent_calls(arrays):
        # The masks matter: without them the padding gets weight.
        unmasked = numpy_of(spec.call(layer, arrays, mask=None)[1])
        assert not np.allclose(unmasked, by_hand[1])


@every_attention_layer
def test_masked_positions_get_exactly_zero_weight(spec):
    arrays = spec.inputs.arrays()
    output, weights = (numpy_of(t) for t in spec.call(spec.make(), arrays))
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    allowed = spec.inputs.allowed(arrays)
    np.testing.assert_array_equal(weights[~allowed], 0.0)
    assert np.all(weights.sum(-1) <= 1.0 + 1e-6)
    no_valid_key = ~allowed.any(-1)
    while no_valid_key.ndim > output.ndim - 1:  # a heads axis: no key for any head
        no_valid_key = no_valid_key.all(1)
    assert no_valid_key.any()
    np.testing.assert_array_equal(output[no_valid_key], 0.0)
    output_mask = spec.inputs.output_mask(arrays)
    assert not output_mask.all()
    np.testing.assert_array_equal(output[~output_mask], 0.0)


@every_attention_layer
def test_masks_key_masks_and_valid_lengths_agree(spec):
    layer = spec.make()
    arrays = spec.inputs.arrays()
    for first, second in spec.inputs.equivalent_calls(arrays):
        for one, other in zip(spec.call(layer, arrays, **first),
                              spec.call(layer, arrays, **second)):
            np.testing.assert_array_equal(numpy_of(one), numpy_of(other))


def projected(inputs, kernel, bias, heads):
    """`x W + b` in NumPy, with its heads on their own axis: `(batch, heads, T, d)`."""
    kernel = numpy_of(kernel).astype("float64")
    result = inputs.astype("float64") @ kernel
    if bias is not None:
        result = result + numpy_of(bias)
    if heads is None:
        return result
    return result.reshape(*result.shape[:2], heads, -1).transpose(0, 2, 1, 3)


@every_attention_layer
def test_the_record_holds_what_the_call_computed(spec):
    """`return_steps=True` returns the output and weights of the same call, with the
    record: a projecting layer's queries, keys and values are `x W + b` per head; the
    softmax is the softmax of its scores over its mask (NumPy), its weights that
    softmax (local-p: times its Gaussian), its context the weights times the values;
    the mask keeps padding (and later positions, and keys outside a window) out."""
    layer = spec.make()
    arrays = spec.inputs.arrays()
    output, weights = (numpy_of(t) for t in spec.call(layer, arrays))
    recorded, record = spec.record(layer, arrays)
    np.testing.assert_array_equal(numpy_of(recorded), output)
    np.testing.assert_array_equal(numpy_of(record.weights), weights)
    mask = numpy_of(record.mask) > 0.5
    assert mask.shape == weights.shape and not np.any(mask & ~spec.inputs.allowed(arrays))
    if not (spec.kwargs.get("alignment", "global") != "global"
            or spec.call_kwargs.get("use_causal_mask")):
        np.testing.assert_array_equal(mask, spec.inputs.allowed(arrays))
    scores = numpy_of(record.scores).astype("float64")
    softmax = reference_softmax(scores, mask)
    np.testing.assert_allclose(numpy_of(record.softmax), softmax, rtol=1e-5, atol=1e-7)
    gaussian = 1.0 if record.gaussian is None else numpy_of(record.gaussian)
    np.testing.assert_allclose(weights, softmax * gaussian, rtol=1e-5, atol=1e-7)
    values = numpy_of(record.values).astype("float64")
    context = weights @ values
    if context.ndim == 3:  # one head: zero at a padded query (heads: W_o's output is)
        context = context * spec.inputs.output_mask(arrays)[:, :, None]
    np.testing.assert_allclose(numpy_of(record.context), context, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(numpy_of(record.weighted_values()).sum(-2),
                               weights @ values, rtol=1e-5, atol=1e-6)
    if isinstance(layer, (MultiHeadAttention, ScaledDotSelfAttention)):  # projects x
        x, x_keys, x_values = spec.inputs.inputs(arrays)
        heads = getattr(layer, "num_heads", None)
        np.testing.assert_array_equal(numpy_of(record.query_input), x)
        np.testing.assert_array_equal(numpy_of(record.key_input), x_keys)
        for part, inputs, kernel, bias in (("query", x, layer.W_q, layer.b_q),
                                           ("keys", x_keys, layer.W_k, layer.b_k),
                                           ("values", x_values, layer.W_v, layer.b_v)):
            np.testing.assert_allclose(numpy_of(getattr(record, part)),
                                       projected(inputs, kernel, bias, heads),
                                       rtol=1e-5, atol=1e-5, err_msg=part)
        score = (layer.score_name if isinstance(layer, MultiHeadAttention)
                 else "scaled_dot" if layer.use_scale else "dot")
        if score in ("scaled_dot", "dot"):  # q · k, over sqrt(d_k) when scaled
            query, keys = (numpy_of(p).astype("float64") for p in (record.query, record.keys))
            expected = query @ np.swapaxes(keys, -1, -2)
            if score == "scaled_dot":
                expected = expected / np.sqrt(query.shape[-1])
            np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)


@every_layer_with_dropout
def test_dropout_only_while_training_and_seeded(spec):
    arrays = spec.inputs.arrays()
    plain = spec.make()
    _, expected = (numpy_of(t) for t in spec.call(plain, arrays))
    first, twin, other = (built_copy(spec, plain, arrays, dropout=0.5, seed=seed)
                          for seed in (3, 3, 4))
    for kwargs in ({}, {"training": False}):
        np.testing.assert_array_equal(numpy_of(spec.call(first, arrays, **kwargs)[1]), expected)
    dropped = numpy_of(spec.call(first, arrays, training=True)[1])
    np.testing.assert_array_equal(numpy_of(spec.call(twin, arrays, training=True)[1]), dropped)
    assert not np.array_equal(numpy_of(spec.call(other, arrays, training=True)[1]), dropped)
    zeroed = (dropped == 0.0) & (expected > 0.0)
    kept = (expected > 0.0) & ~zeroed
    # Rate 0.5; the draw is seeded, so the fraction is fixed per backend.
    assert 0.1 < zeroed.sum() / (expected > 0.0).sum() < 0.9
    np.testing.assert_allclose(dropped[kept], 2.0 * expected[kept], rtol=1e-6)


@every_layer
def test_gradients_reach_every_trainable_weight_and_float_input(spec):
    layer = spec.make()
    arrays = spec.inputs.arrays()
    output, _ = spec.call(layer, arrays)
    probe = np.random.default_rng(2).normal(size=tuple(output.shape)).astype("float32")
    names = spec.inputs.float_names

    def loss(*floats):
        output, _ = spec.call(layer, {**arrays, **dict(zip(names, floats))})
        return ops.sum(ops.cast(output, "float32") * ops.convert_to_tensor(probe))

    by_weight, by_input = gradients(loss, layer.trainable_weights, [arrays[n] for n in names])
    assert len(by_weight) + len(by_input) > 0
    labels = [w.path for w in layer.trainable_weights] + list(names)
    for label, gradient in zip(labels, by_weight + by_input):
        assert gradient is not None, label
        assert np.all(np.isfinite(gradient)), label
        assert np.any(gradient != 0.0), label


# Within the precision of the compute dtype: bfloat16 keeps 8 bits of mantissa.
HALF_TOLERANCE = {"float16": 0.02, "bfloat16": 0.15}


@pytest.mark.parametrize("policy", ["float16", "bfloat16", "mixed_float16", "mixed_bfloat16"])
@every_layer
def test_half_precision_is_finite_and_close_to_float32(spec, policy):
    arrays = spec.inputs.arrays()
    reference = spec.make()
    expected = [numpy_of(t) for t in spec.call(reference, arrays)]
    layer = built_copy(spec, reference, arrays, dtype=policy)
    got = spec.call(layer, cast_floats(spec, arrays, layer.compute_dtype))
    for tensor, want in zip(got, expected):
        if tensor is None:
            continue
        assert keras.backend.standardize_dtype(tensor.dtype) == layer.compute_dtype
        tensor = numpy_of(tensor)
        assert np.all(np.isfinite(tensor))
        np.testing.assert_allclose(tensor, want, atol=HALF_TOLERANCE[layer.compute_dtype])
    if got[1] is not None:
        np.testing.assert_array_equal(numpy_of(got[1])[~spec.inputs.allowed(arrays)], 0.0)
