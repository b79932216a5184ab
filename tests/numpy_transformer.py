"""An independent NumPy reference of the self-attention blocks, from Vaswani et al. 2017.

Written from the paper's formulas (sections 3.1-3.3) and Luong et al.'s general score, with
the weights read by name from a block; shared by the transformer tests (not a test module).
Weights are in Keras's (input, output) layout: `x @ W`.
"""

import math

import numpy as np

EPSILON = 1e-6


def parameters(block):
    """A block's weights by path below the block (`self_attention/W_q`, ...), float64."""
    prefix = block.name + "/"
    return {weight.path.removeprefix(prefix): np.asarray(weight.numpy(), "float64")
            for weight in block.weights}


def layer_norm(x, gamma, beta):
    """`(x - mean) / sqrt(var + eps) * gamma + beta` over the last axis (Ba et al. 2016)."""
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + EPSILON) * gamma + beta


def softmax(scores, allowed):
    scores = np.where(allowed, scores, -np.inf)
    peak = np.max(np.where(allowed, scores, -1e300), axis=-1, keepdims=True)
    exps = np.where(allowed, np.exp(scores - peak), 0.0)
    return exps / np.maximum(exps.sum(axis=-1, keepdims=True), 1e-300)


def multi_head(p, name, heads, query, memory, allowed, score="scaled_dot"):
    """`Concat(head_1..head_h) W_o + b_o`, `head_i = softmax(a(q W_q^i, k W_k^i)) v W_v^i`,
    one head at a time. `allowed` `(B, Tq, Tv)`. Returns output and weights `(B, h, Tq, Tv)`."""
    width = p[f"{name}/W_q"].shape[1] // heads
    outputs, all_weights = [], []
    for i in range(heads):
        columns = slice(i * width, (i + 1) * width)
        q = query @ p[f"{name}/W_q"][:, columns] + p[f"{name}/b_q"][columns]
        k = memory @ p[f"{name}/W_k"][:, columns] + p[f"{name}/b_k"][columns]
        v = memory @ p[f"{name}/W_v"][:, columns] + p[f"{name}/b_v"][columns]
        if score == "scaled_dot":
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(width)
        elif score == "general":  # q_tᵀ W k_s, W = W_aᵀ in Keras's layout
            scores = q @ (k @ p[f"{name}/score/W_a"]).transpose(0, 2, 1)
        else:
            raise ValueError(score)
        weights = softmax(scores, allowed)
        outputs.append(weights @ v)
        all_weights.append(weights)
    output = np.concatenate(outputs, axis=-1) @ p[f"{name}/W_o"] + p[f"{name}/b_o"]
    return output, np.stack(all_weights, axis=1)


def feed_forward(p, x, activation="relu"):
    """`FFN(x) = act(x W_1 + b_1) W_2 + b_2` (eq. 2)."""
    inner = x @ p["W_1/kernel"] + p["W_1/bias"]
    if activation == "relu":
        inner = np.maximum(inner, 0.0)
    else:  # GELU, the exact form x Φ(x)
        inner = inner * 0.5 * (1.0 + np.vectorize(math.erf)(inner / math.sqrt(2.0)))
    return inner @ p["W_2/kernel"] + p["W_2/bias"]


def sublayer(p, name, norm, x, function):
    """Post-norm `LayerNorm(x + f(x))` (Vaswani et al.) or pre-norm `x + f(LayerNorm(x))`."""
    gamma, beta = p[f"{name}/gamma"], p[f"{name}/beta"]
    if norm == "post":
        return layer_norm(x + function(x), gamma, beta)
    return x + function(layer_norm(x, gamma, beta))


def encoder_block(block, x, mask, norm, activation="relu"):
    """Self-attention over the real positions, then the feed-forward network."""
    p = parameters(block)
    x = np.asarray(x, "float64")
    allowed = np.broadcast_to(np.asarray(mask, bool)[:, None, :],
                              (x.shape[0], x.shape[1], x.shape[1]))

    def attend(h):
        return multi_head(p, "self_attention", block.num_heads, h, h, allowed)[0]

    x = sublayer(p, "self_attention_norm", norm, x, attend)
    return sublayer(p, "feed_forward_norm", norm, x, lambda h: feed_forward(p, h, activation))


def decoder_block(block, x, memory, source_mask, norm, score):
    """Causal self-attention, cross-attention over `memory`, feed-forward."""
    p = parameters(block)
    x, memory = np.asarray(x, "float64"), np.asarray(memory, "float64")
    batch, length = x.shape[:2]
    causal = np.broadcast_to(np.tril(np.ones((length, length), bool)), (batch, length, length))
    source = np.broadcast_to(np.asarray(source_mask, bool)[:, None, :],
                             (batch, length, memory.shape[1]))

    def attend_self(h):
        return multi_head(p, "self_attention", block.num_heads, h, h, causal)[0]

    def attend_source(h):
        return multi_head(p, "cross_attention", block.num_heads, h, memory, source, score)[0]

    x = sublayer(p, "self_attention_norm", norm, x, attend_self)
    x = sublayer(p, "cross_attention_norm", norm, x, attend_source)
    return sublayer(p, "feed_forward_norm", norm, x, lambda h: feed_forward(p, h))
