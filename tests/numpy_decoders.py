"""Independent NumPy references of the attentional decoders, written from the papers.

Bahdanau, Cho & Bengio 2015 (arXiv:1409.0473), eq. 4-6 and appendix A.2.2: the
query is the previous state,

    e_ij = a(s_{i-1}, h_j),  α_i = softmax_j(e_i),  c_i = Σ_j α_ij h_j
    s_i  = RNN(s_{i-1}, [y_{i-1}; c_i])

Luong, Pham & Manning 2015 (arXiv:1508.04025), eq. 5 and section 3.3: the RNN first,
its new output is the query,

    h_t = RNN(h_{t-1}, x_t),  x_t = y_{t-1}, or [y_{t-1}; h̃_{t-1}] with input feeding
    a_t = softmax_s(score(h_t, h̄_s)),  c_t = Σ_s a_ts h̄_s,  h̃_t = tanh(W_c [c_t; h_t])

Both then read out `logits = W_o LayerNorm(feature) + b_o`, the feature being `s_i`
(Bahdanau) or `h̃_t` (Luong), and `h̃_0 = 0`. `y` is the embedding of the previous
token. The cells are the GRU of Cho et al. 2014 (reset gate applied after the
recurrent product, as cuDNN and Keras's `reset_after=True`) and the LSTM of Hochreiter
& Schmidhuber 1997, with Keras's gate order (`z, r, n` and `i, f, g, o`).

The weights are read from a model by their checkpoint names (`decoder/attention/W_a`,
...) and used in Keras's `(input, output)` layout, `x @ W`; a concatenation `[a; b]`
is built as such and multiplied by the whole kernel. Nothing here calls attncli's code.
Global attention only.
"""

import numpy as np
from numpy_attention import reference_softmax


def model_weights(model):
    """Every weight of a Keras model as float64, keyed by its path inside the model
    (`"decoder/attention/W_a"`)."""
    return {
        weight.path.split("/", 1)[1]: np.asarray(weight.numpy(), dtype="float64")
        for weight in model.weights
    }


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def gru_step(x, state, weights, prefix):
    """Cho et al. 2014, reset after the product. `state` is `(h,)`."""
    (h,) = state
    units = h.shape[-1]
    inputs = x @ weights[f"{prefix}/kernel"] + weights[f"{prefix}/bias"]
    recurrent = h @ weights[f"{prefix}/recurrent_kernel"] + weights[f"{prefix}/recurrent_bias"]
    x_z, x_r, x_n = (inputs[:, k * units:(k + 1) * units] for k in range(3))
    h_z, h_r, h_n = (recurrent[:, k * units:(k + 1) * units] for k in range(3))
    z = sigmoid(x_z + h_z)
    r = sigmoid(x_r + h_r)
    n = np.tanh(x_n + r * h_n)
    h = z * h + (1.0 - z) * n
    return (h,)


def lstm_step(x, state, weights, prefix):
    """Hochreiter & Schmidhuber 1997 with a forget gate. `state` is `(h, c)`."""
    h, c = state
    units = h.shape[-1]
    gates = (x @ weights[f"{prefix}/kernel"] + h @ weights[f"{prefix}/recurrent_kernel"]
             + weights[f"{prefix}/bias"])
    i, f, g, o = (gates[:, k * units:(k + 1) * units] for k in range(4))
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h = sigmoid(o) * np.tanh(c)
    return h, c


CELL_STEPS = {"gru": gru_step, "lstm": lstm_step}


def layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def attention_scores(score, query, keys, weights):
    """Scores `(B, S)` of one query `(B, d_q)` against keys `(B, S, d_k)`.

    dot `qᵀk`, scaled_dot `qᵀk / sqrt(d)`, general `qᵀ W_a k`, concat
    `v_aᵀ tanh(W_a [q; k])` (Luong eq. 8), additive `vᵀ tanh(W_q q + W_k k)`
    (Bahdanau appendix A.1.2).
    """
    prefix = "decoder/attention"
    if score == "dot":
        return np.einsum("bd,bsd->bs", query, keys)
    if score == "scaled_dot":
        return np.einsum("bd,bsd->bs", query, keys) / np.sqrt(query.shape[-1])
    if score == "general":
        # W_a is stored (key_dim, query_dim): W_a k is `k @ W_a`
        return np.einsum("bd,bsd->bs", query, keys @ weights[f"{prefix}/W_a"])
    if score == "concat":
        # pairs: batch x S x (d_q + d_k), [q; h̄_s] for every source position
        repeated = np.broadcast_to(query[:, None, :], keys.shape[:2] + query.shape[-1:])
        pairs = np.concatenate([repeated, keys], axis=-1)
        return np.tanh(pairs @ weights[f"{prefix}/W_a"]) @ weights[f"{prefix}/v_a"]
    if score == "additive":
        hidden = (query @ weights[f"{prefix}/W_q"])[:, None, :] + keys @ weights[f"{prefix}/W_k"]
        return np.tanh(hidden) @ weights[f"{prefix}/v"]
    raise ValueError(f"no reference for score={score!r}")


def bridged_state(config, final_state, weights):
    """`s_0`: `tanh(W_b h_final + b_b)` per state tensor (dense), zeros, or a copy."""
    if config.bridge == "zeros":
        return tuple(np.zeros_like(state[:, : config.units]) for state in final_state)
    if config.bridge == "copy":
        return tuple(final_state)
    return tuple(
        np.tanh(state @ weights[f"bridge_{k}/kernel"] + weights[f"bridge_{k}/bias"])
        for k, state in enumerate(final_state)
    )


def reference_decode(model, source_ids, target_in_ids, annotations, final_state):
    """The teacher-forced decoder, step by step.

    Args:
        model: a `Seq2Seq`; its config and weights are read, nothing is run.
        source_ids: int `(B, S)`, 0 at padding.
        target_in_ids: int `(B, T)`, `[bos] + target`.
        annotations: the encoder's outputs `h_1 .. h_S`, `(B, S, d)`.
        final_state: the encoder's final state, a tuple of `(B, units)`.

    Returns:
        dict of float64 arrays, one entry per step along axis 1: `queries`
        `(B, T, units)` (`s_{i-1}` or `h_t`), `scores` `(B, T, S)` (before the softmax,
        padding included), `weights` `(B, T, S)`, `contexts` `(B, T, d)` and `logits`
        `(B, T, V)`.
    """
    config = model.config
    weights = model_weights(model)
    values = np.asarray(annotations, dtype="float64")
    source_mask = np.asarray(source_ids) != 0
    cell_step = CELL_STEPS[config.cell]
    cell = f"decoder/{config.cell}_cell"
    embeddings = weights["decoder/embedding/embeddings"]
    epsilon = model.decoder.output_norm.epsilon

    def attend(query):
        scores = attention_scores(config.score, query, values, weights)
        alpha = reference_softmax(scores, source_mask)
        return {"queries": query, "scores": scores, "weights": alpha,
                "contexts": np.einsum("bs,bsd->bd", alpha, values)}

    def readout(feature):
        normed = layer_norm(
            feature, weights["decoder/output_norm/gamma"], weights["decoder/output_norm/beta"],
            epsilon,
        )
        return normed @ weights["decoder/output_projection/kernel"] + (
            weights["decoder/output_projection/bias"]
        )

    state = bridged_state(
        config, tuple(np.asarray(s, dtype="float64") for s in final_state), weights
    )
    attentional = np.zeros((values.shape[0], config.units))
    steps = []
    for t in range(target_in_ids.shape[1]):
        y = embeddings[np.asarray(target_in_ids)[:, t]]
        if config.decoder == "bahdanau":
            step = attend(state[0])
            state = cell_step(
                np.concatenate([y, step["contexts"]], axis=-1), state, weights, cell
            )
            feature = state[0]
        else:
            x = np.concatenate([y, attentional], axis=-1) if config.input_feeding else y
            state = cell_step(x, state, weights, cell)
            step = attend(state[0])
            attentional = np.tanh(
                np.concatenate([step["contexts"], state[0]], axis=-1)
                @ weights["decoder/W_c/kernel"]
            )
            feature = attentional
        step["logits"] = readout(feature)
        steps.append(step)
    return {name: np.stack([step[name] for step in steps], axis=1) for name in steps[0]}
