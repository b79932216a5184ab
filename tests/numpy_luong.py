"""Luong, Pham & Manning 2015, "Effective Approaches to Attention-based Neural Machine
Translation", section 3, in NumPy: one query and one source word at a time, float64,
in the paper's column-vector notation.

    score(h_t, h̄_s) = h_tᵀ h̄_s                      dot       (eq. 8)
                     = h_tᵀ W_a h̄_s                  general
                     = v_aᵀ tanh(W_a [h_t; h̄_s])     concat
    a_t(s) = exp(score(h_t, h̄_s)) / Σ_s' exp(score(h_t, h̄_s'))          (eq. 7)
    p_t = t                                           local-m
    p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))             local-p    (eq. 9)
    a_t(s) ← a_t(s) · exp(-(s - p_t)² / (2σ²)),  σ = D / 2      local-p    (eq. 10)
    c_t = Σ_s a_t(s) h̄_s

Local attention takes the softmax over the source words in the window
`[p_t - D, p_t + D]` (section 3.2) and ignores the part of the window outside the
sentence. `S` is the source sentence's length; source positions `s` count the
sentence's words from 0, so `p_t` lies in `[0, S]`.

The matrices are given as the paper writes them (`W_a` acts on a column vector); Keras
layers store their transposes.
"""

import numpy as np


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def luong_score(h_t, h_s, score, W_a=None, v_a=None):
    """Eq. 8 for one decoder state `h_t` and one encoder state `h_s`."""
    if score == "dot":
        return h_t @ h_s
    if score == "general":
        return h_t @ W_a @ h_s
    return v_a @ np.tanh(W_a @ np.concatenate([h_t, h_s]))


def local_p_centre(h_t, source_length, W_p, v_p):
    """Eq. 9: `p_t = S · sigmoid(v_pᵀ tanh(W_p h_t))`, in `[0, S]`."""
    return source_length * sigmoid(v_p @ np.tanh(W_p @ h_t))


def luong_attention(query, keys, values, score="dot", alignment="global", window=10,
                    matrices=None, value_mask=None, query_mask=None, query_positions=None):
    """Context, weights and window centres of Luong attention.

    Args:
        query: `(B, Tq, d_q)` decoder states `h_t`.
        keys, values: `(B, Tv, d_k)`, `(B, Tv, d_v)`; the source sentence of row `b`
            is its positions where `value_mask[b]` is True, in order.
        score: `"dot"`, `"general"` or `"concat"`.
        alignment: `"global"`, `"local-m"` or `"local-p"`.
        window: the half-width `D`.
        matrices: `W_a`, `v_a`, `W_p`, `v_p` in the paper's orientation, as needed.
        value_mask, query_mask: `(B, Tv)`, `(B, Tq)` booleans, or None.
        query_positions: `(B, Tq)` integers `t` for local-m; default `0 .. Tq-1`.

    Returns:
        `(context (B, Tq, d_v), weights (B, Tq, Tv), centres (B, Tq))`, float64;
        `centres` is NaN for global attention.
    """
    m = {name: np.asarray(value, "float64") for name, value in (matrices or {}).items()}
    query, keys, values = (np.asarray(x, "float64") for x in (query, keys, values))
    batch, num_queries, _ = query.shape
    num_keys = keys.shape[1]
    sigma = window / 2.0
    weights = np.zeros((batch, num_queries, num_keys))
    centres = np.full((batch, num_queries), np.nan)
    for b in range(batch):
        sentence = [j for j in range(num_keys) if value_mask is None or value_mask[b, j]]
        source_length = len(sentence)
        for t in range(num_queries):
            h_t = query[b, t]
            if alignment == "local-m":
                centres[b, t] = t if query_positions is None else query_positions[b, t]
            elif alignment == "local-p":
                centres[b, t] = local_p_centre(h_t, source_length, m["W_p"], m["v_p"])
            p_t = centres[b, t]
            # (s, j): source position s of the word stored at column j.
            attended = [
                (s, j) for s, j in enumerate(sentence)
                if alignment == "global" or abs(s - p_t) <= window
            ]
            if not attended:
                continue
            scores = np.array([
                luong_score(h_t, keys[b, j], score, m.get("W_a"), m.get("v_a"))
                for _, j in attended
            ])
            align = np.exp(scores - scores.max())
            align /= align.sum()
            for (s, j), a in zip(attended, align):
                if alignment == "local-p":
                    a *= np.exp(-((s - p_t) ** 2) / (2.0 * sigma**2))
                weights[b, t, j] = a
    context = weights @ values
    if query_mask is not None:
        context = context * np.asarray(query_mask, bool)[..., None]
    return context, weights, centres
