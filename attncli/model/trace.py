"""One step of one attention, as the model computed it: the query, keys, values, scores,
weights and context that `inspect-weights --step`, `score-demo` and the server show.

    scores[s]  = score(q, k_s)                 -inf where the query may not see key s
    weights    = softmax(scores)               (local-p: times its Gaussian)
    context    = sum_s weights[s] v_s          = weights @ values

`trace_attention(model, source_ids, target_in_ids, attention, layer)` runs the model
teacher-forced over one sentence and returns every query of one attention layer, all
heads at once (`AttentionTrace`); `AttentionTrace.step(head, step)` is the
`AttentionStep` of one query of one head. `Seq2Seq.trace` does both for one step.

Every figure comes from the attention layer's own methods: a recurrent decoder's
`decode_step` (the step the search takes) gives its query and weights, and its
attention's `score_projected` and `score_mask` the scores; a block's
`layers.MultiHeadAttention` gives its heads' projections, scores and weights; the
alignment layer's `query` gives `q_t`, its `LuongAttention` the scores
`q_t · (h_s W_a)` and the teacher-forced pass (`Seq2Seq.teacher_forced`) the weights.
The names of the attentions are `attncli.attentions`'.
"""

import dataclasses
import math

import numpy as np

from attncli.attentions import ATTENTIONS, NO_ALIGNMENT_LAYER
from attncli.scores import ALIGNMENTS, SCORES


def _norm(vector):
    return float(np.linalg.norm(np.asarray(vector, "float64")))


def _json_scores(scores):
    return [None if not math.isfinite(value) else value for value in scores.tolist()]


@dataclasses.dataclass(frozen=True)
class AttentionStep:
    """One query of one head of one attention, with everything its weights came from.

    Arrays are float64 NumPy arrays with no batch axis; `S` is the number of keys.

    Attributes:
        attention: `"cross"` (the decoder's attention over the source), `"encoder"`
            or `"decoder"` (their self-attention), `"alignment"` (the alignment layer).
        layer: int, the 1-based block; 1 for a recurrent decoder's attention and for
            the alignment layer.
        head: int, the 1-based head, or None for single-head attention.
        step: int, the 1-based query position (the output token for cross and
            decoder attention, the source token for the encoder's).
        score: the score function's name (`"scaled_dot"`, `"general"`, ...; a
            recurrent decoder's with its alignment: `"general, local-p"`).
        formula: the score written out, e.g. `"q · k / √64"` (`attncli.scores`).
        query_token: str, the token of the query position.
        key_tokens: list of str, one per key position.
        query: `(d,)`, the query the layer scored.
        keys: `(S, d_k)`, what the query was scored against: a recurrent decoder's
            encoder states `h̄_s` (the alignment layer's too: `h_s`, the score
            `q · (h_s W_a)`), a head's `x_s W_k + b_k`.
        values: `(S, d_v)`.
        scores: `(S,)` before the softmax, `-inf` where the key is masked (padding,
            outside a local window, a later position of a causal self-attention).
        weights: `(S,)` after it, exactly 0 where masked.
        context: `(d_v,)`, `weights @ values` (a head's output before `W_o`).
        inputs: `(S, d_in)`, a multi-head attention's key and value inputs `x_s`
            (the sublayer's input, or the encoder's outputs for cross-attention);
            None for a recurrent decoder's.
        x: `(d_model,)`, the query's input row of a multi-head attention, or None.
    """

    attention: str
    layer: int
    head: int | None
    step: int
    score: str
    formula: str
    query_token: str
    key_tokens: list
    query: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    context: np.ndarray
    inputs: np.ndarray | None = None
    x: np.ndarray | None = None

    def weighted_values(self):
        """`weights[s] * values[s]`, `(S, d_v)`: the terms of the context's sum."""
        return self.weights[:, None] * self.values

    def to_dict(self, width=None):
        """The step as JSON-safe Python values.

        Every vector is cut to its first `width` components (None: all of them) and
        has its full norm beside it (`"query_norm"`, `"keys_norms"`, ...); `"width"`
        is the full size of the longest vector, `"shown"` the components kept.
        Masked scores (-inf) are None.
        """
        vectors = {"query": self.query, "context": self.context}
        matrices = {"keys": self.keys, "values": self.values,
                    "weighted_values": self.weighted_values()}
        if self.x is not None:
            vectors["x"] = self.x
        if self.inputs is not None:
            matrices["inputs"] = self.inputs
        full = max(array.shape[-1] for array in (*vectors.values(), *matrices.values()))
        shown = full if width is None else min(width, full)
        document = {
            "attention": self.attention, "layer": self.layer, "head": self.head,
            "step": self.step, "score": self.score, "formula": self.formula,
            "query_token": self.query_token, "key_tokens": list(self.key_tokens),
            "scores": _json_scores(self.scores),
            "weights": np.asarray(self.weights, "float64").tolist(),
        }
        for name, vector in vectors.items():
            document[name] = np.asarray(vector, "float64")[:shown].tolist()
            document[f"{name}_norm"] = _norm(vector)
        for name, matrix in matrices.items():
            document[name] = np.asarray(matrix, "float64")[:, :shown].tolist()
            document[f"{name}_norms"] = [_norm(row) for row in matrix]
        document.update(width=int(full), shown=int(shown))
        return document


@dataclasses.dataclass(frozen=True)
class AttentionTrace:
    """Every query of every head of one attention layer, teacher-forced.

    Attributes:
        attention, layer, score, formula: as `AttentionStep`.
        multi_head: bool, whether the heads are a `MultiHeadAttention`'s (a
            recurrent decoder's single attention is one head, `head` None).
        queries: `(H, Tq, d)`.
        keys: `(H, S, d_k)`.
        values: `(H, S, d_v)`.
        scores: `(H, Tq, S)`, -inf where masked.
        weights: `(H, Tq, S)`, as the model computed them.
        inputs: `(S, d_in)` or None; x: `(Tq, d_model)` or None (see `AttentionStep`).
    """

    attention: str
    layer: int
    score: str
    formula: str
    multi_head: bool
    queries: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    inputs: np.ndarray | None = None
    x: np.ndarray | None = None

    @property
    def num_heads(self):
        return self.weights.shape[0]

    @property
    def num_queries(self):
        return self.weights.shape[1]

    def step(self, head, step, query_tokens=None, key_tokens=None):
        """The `AttentionStep` of query `step` (1-based) of `head` (1-based; None:
        head 1). `query_tokens` and `key_tokens` label the positions (default:
        their numbers); key positions beyond `key_tokens` are left out."""
        head_index = (head or 1) - 1
        if not 0 <= head_index < self.num_heads:
            raise ValueError(f"head {head} is out of range 1..{self.num_heads}")
        if not 1 <= step <= self.num_queries:
            raise ValueError(f"step {step} is out of range 1..{self.num_queries}")
        keys_shown = self.weights.shape[2] if key_tokens is None else len(key_tokens)
        positions = slice(0, keys_shown)
        query_tokens = query_tokens or [str(t + 1) for t in range(self.num_queries)]
        key_tokens = key_tokens or [str(s + 1) for s in range(keys_shown)]
        weights = self.weights[head_index, step - 1, positions]
        values = self.values[head_index, positions]
        return AttentionStep(
            attention=self.attention,
            layer=self.layer,
            head=head_index + 1 if self.multi_head else None,
            step=step,
            score=self.score,
            formula=self.formula,
            query_token=query_tokens[step - 1],
            key_tokens=list(key_tokens),
            query=self.queries[head_index, step - 1],
            keys=self.keys[head_index, positions],
            values=values,
            scores=self.scores[head_index, step - 1, positions],
            weights=weights,
            context=weights @ values,
            inputs=None if self.inputs is None else self.inputs[positions],
            x=None if self.x is None else self.x[step - 1],
        )


def score_formula(score, key_dim=None, alignment="global"):
    """The score `score(q, k)` written out (`attncli.scores.SCORES`), `√d` given its
    value, followed by the keys a local `alignment` keeps."""
    text = SCORES[score].formula.split(" = ", 1)[1]
    if key_dim is not None:
        text = text.replace("√d", f"√{key_dim}")
    window = ALIGNMENTS[alignment].window
    return f"{text} {window}" if window else text


def _float64(tensor):
    return np.asarray(tensor, "float64")


def _masked(scores, allowed):
    """The scores with -inf where `allowed` is False, as the softmax saw them."""
    return np.where(allowed, scores, -np.inf)


def trace_attention(model, source_ids, target_in_ids, attention="cross", layer=1):
    """Every query and head of one attention layer of `model` over one sentence.

    Args:
        model: a `Seq2Seq`.
        source_ids: int `(1, S)`, the source as the search read it.
        target_in_ids: int `(1, T)`, `[START] + the output tokens but the last`.
        attention: `"cross"`, `"encoder"`, `"decoder"` or `"alignment"`.
        layer: int, 1-based block of that attention (1 for a recurrent decoder's and
            for the alignment layer).

    Returns:
        `AttentionTrace`.

    Raises:
        ValueError: the model has no such attention or layer.
    """
    from keras import ops

    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}. "
                         f"Received: attention={attention!r}")
    config = model.config
    if attention == "alignment":
        if model.alignment_layer is None:
            raise ValueError(NO_ALIGNMENT_LAYER)
        _check_layer(layer, 1)
        return _alignment_trace(model, source_ids, target_in_ids)
    if attention == "encoder":
        if not config.self_attention_encoder:
            raise ValueError("the encoder is recurrent: it has no self-attention")
        blocks = model.encoder.blocks
        _check_layer(layer, len(blocks))
        source_mask = ops.not_equal(source_ids, 0)
        query_input = _encoder_attention_inputs(model.encoder, source_ids, layer)
        block = blocks[layer - 1]
        return _multi_head_trace(block.self_attention, "encoder", layer, query_input,
                                 query_input, source_mask, causal=False)
    if not model.self_attention_decoder:
        if attention == "decoder":
            raise ValueError("the decoder is recurrent: it has no self-attention")
        _check_layer(layer, 1)
        return _recurrent_trace(model, source_ids, target_in_ids)
    _check_layer(layer, len(model.decoder.blocks))
    values, _, source_mask = model.encoder(source_ids)
    memory = model.decoder.memory(values, source_mask)
    self_input, cross_input = _decoder_attention_inputs(model.decoder, target_in_ids,
                                                        memory, layer)
    block = model.decoder.blocks[layer - 1]
    if attention == "decoder":
        return _multi_head_trace(block.self_attention, "decoder", layer, self_input,
                                 self_input, ops.not_equal(target_in_ids, 0), causal=True)
    return _multi_head_trace(block.cross_attention, "cross", layer, cross_input, values,
                             source_mask, causal=False)


def _check_layer(layer, count):
    if not 1 <= layer <= count:
        raise ValueError(f"layer {layer} is out of range 1..{count}")


def _encoder_attention_inputs(encoder, source_ids, layer):
    """What block `layer`'s self-attention reads: its sublayer input `(1, S, d)`.

    The first block's input is the encoder's own (`blocks_input`: the embedded source,
    or a cascade's recurrent outputs); the blocks before it run as the encoder runs them
    (their own call)."""
    from keras import ops

    source_mask = ops.not_equal(source_ids, 0)
    x = encoder.blocks_input(source_ids)
    for block in encoder.blocks[: layer - 1]:
        x = block(x, source_mask)
    block = encoder.blocks[layer - 1]
    return block.sublayer_input(x, block.self_attention_norm)


def _decoder_attention_inputs(decoder, target_in_ids, memory, layer):
    """What block `layer`'s self-attention and cross-attention read: `(self_input,
    cross_input)`, each `(1, T, d)`.

    The blocks before it run as the decoder runs them (their own call); in the block,
    the cross-attention reads the residual sum after the self-attention sublayer, as
    `DecoderBlock.call` computes it."""
    from keras import ops

    target_mask = ops.not_equal(target_in_ids, 0)
    x = decoder.embed(target_in_ids)
    for index, block in enumerate(decoder.blocks[: layer - 1]):
        x, _, _ = block(x, target_mask, memory["cross_keys"][index],
                        memory["cross_values"][index], memory["source_mask"])
    block = decoder.blocks[layer - 1]
    self_input = block.sublayer_input(x, block.self_attention_norm)
    attended = block.self_attention.attend(self_input, self_input, self_input,
                                           value_mask=target_mask, use_causal_mask=True)
    x = block.sublayer_output(x, attended, block.self_attention_norm, training=False)
    return self_input, block.sublayer_input(x, block.cross_attention_norm)


def _multi_head_trace(layer_object, attention, layer, query_input, key_input, value_mask,
                      causal):
    """The `AttentionTrace` of a `layers.MultiHeadAttention` attending `query_input`
    `(1, Tq, d)` to `key_input` `(1, S, d_in)`, as the block calls it."""
    projected_keys, values = layer_object.project_key_value(key_input)
    _, weights = layer_object.attend_projected(
        query_input, projected_keys, values, value_mask=value_mask,
        use_causal_mask=causal, return_attention_scores=True,
    )
    scores = layer_object.score_projected(query_input, projected_keys)
    # The heads' own projections x W^i + b^i: `project_queries` would scale the query
    # by 1/√d_k and `project_keys` add the score's key term (k W_a, ...), which the
    # formula shows instead.
    queries = layer_object._split_heads(query_input, layer_object.W_q, layer_object.b_q,
                                        layer_object.key_dim)
    keys = layer_object._split_heads(key_input, layer_object.W_k, layer_object.b_k,
                                     layer_object.key_dim)
    weights = _float64(weights)[0]
    num_queries, num_keys = weights.shape[1:]
    allowed = np.broadcast_to(np.asarray(value_mask, bool)[0][None, :],
                              (num_queries, num_keys))
    if causal:
        allowed = allowed & np.tri(num_queries, num_keys, num_keys - num_queries, dtype=bool)
    name = layer_object.score_name
    return AttentionTrace(
        attention=attention,
        layer=layer,
        score=name,
        formula=score_formula(name, layer_object.key_dim),
        multi_head=True,
        queries=_float64(queries)[0],
        keys=_float64(keys)[0],
        values=_float64(values)[0],
        scores=_masked(_float64(scores)[0], allowed[None]),
        weights=weights,
        inputs=_float64(key_input)[0],
        x=_float64(query_input)[0],
    )


def _recurrent_trace(model, source_ids, target_in_ids):
    """The `AttentionTrace` of a recurrent decoder's attention, one head.

    The decoder takes the search's steps (`decode_step`) over `target_in_ids`; the
    query of step t is the state before it (Bahdanau: `s_{t-1}`) or the RNN's new
    output (Luong: `h_t`), and its weights are the step's own."""
    from keras import ops

    memory, state = model.encode(source_ids)
    queries, weights = [], []
    for t in range(int(target_in_ids.shape[1])):
        before = state
        _, state, step_weights = model.decode_step(target_in_ids[:, t], state, memory)
        queries.append((before if model.config.decoder == "bahdanau" else state)[0])
        weights.append(step_weights)
    # queries: 1 x T x units; weights: 1 x T x S
    queries = ops.stack(queries, axis=1)
    weights = ops.stack(weights, axis=1)
    attention = model.decoder.attention
    scores = attention.score_projected(queries, memory["projected_keys"])
    steps = ops.arange(int(target_in_ids.shape[1]), dtype="int32")[None, :]
    allowed = attention.score_mask(queries, memory["values"], memory["source_mask"],
                                   query_positions=steps)
    scores = _float64(scores)
    if allowed is not None:
        scores = _masked(scores, np.broadcast_to(np.asarray(allowed, bool), scores.shape))
    config = model.config
    values = _float64(memory["values"])
    return AttentionTrace(
        attention="cross",
        layer=1,
        score=f"{config.score}, {config.alignment}",
        formula=score_formula(config.score, values.shape[-1], config.alignment),
        multi_head=False,
        queries=_float64(queries),
        keys=values,
        values=values,
        scores=scores,
        weights=_float64(weights),
    )


def _alignment_trace(model, source_ids, target_in_ids):
    """The `AttentionTrace` of the alignment layer (`AlignmentLayer`), one head.

    Its queries are the layer's own `query` of the teacher-forced pass's features
    (`q_t = tanh(W_q [f_t; f_{t+1}; E(y_t)] + b_q)`, with `c_t` in front for the
    full context), its scores its `LuongAttention`'s `q_t · (h_s W_a)`
    (`project_keys`, `score_projected`, `score_mask`), and its weights those the pass
    computed (`Seq2Seq.teacher_forced`'s `"alignment"`)."""
    layer = model.alignment_layer
    features, maps = model.teacher_forced(source_ids, target_in_ids)
    values, _, source_mask = model.encoder(source_ids)
    next_embeddings, target_mask = model.alignment_inputs(target_in_ids)
    # queries: 1 x T x units, read as one head
    queries = layer.query(features, next_embeddings, target_mask)
    attention = layer.attention
    scores = _float64(attention.score_projected(queries, attention.project_keys(values)))
    allowed = np.asarray(attention.score_mask(queries, values, source_mask), bool)
    values = _float64(values)
    return AttentionTrace(
        attention="alignment",
        layer=1,
        score=attention.score_name,
        formula=score_formula(attention.score_name, values.shape[-1]),
        multi_head=False,
        queries=_float64(queries),
        keys=values,
        values=values,
        scores=_masked(scores, np.broadcast_to(allowed, scores.shape)),
        weights=_float64(maps["alignment"][0])[:, 0],
    )
