"""An independent NumPy reference of the cascaded encoder (Chen et al. 2018, arXiv:1804.09849,
the section "Cascaded Encoder"), composed from the references of its parts.

The recurrent layers, from Bahdanau et al. 2015 (section 3.2, appendix A.2.1): each layer
reads the real positions forward, `h->_s = RNN(h->_{s-1}, x_s)`, and, if bidirectional,
backward from the last real position, `h<-_s = RNN(h<-_{s+1}, x_s)`, both from a zero
state; the annotation is `[h->_s; h<-_s]` (concat) or `h->_s + h<-_s` (sum), zero at
padding, and the final state merges `h->` after the last real position with `h<-` after
the first (for an LSTM, `h` and `c` alike). Each layer reads the one below. The cells are
`numpy_decoders`'s.

Then Vaswani et al. 2017's encoder blocks (`numpy_transformer.encoder_block`) on the top
layer's annotations, mapped to the blocks' width first, `x_0 = r W_p + b_p`, when the widths
differ, with no position encoding; pre-norm stacks end in a LayerNorm. The weights are read
from a model by their paths; nothing here calls attncli's code.
"""

from types import SimpleNamespace

import numpy as np
from numpy_decoders import CELL_STEPS, model_weights
from numpy_transformer import encoder_block, layer_norm, multi_head, parameters


def recurrent_encoder(weights, config, source_ids, prefix="encoder"):
    """The recurrent layers: `(annotations (B, S, R), final_state)`, float64, the final
    state a tuple `(h,)` or `(h, c)` of `(B, R)`."""
    step = CELL_STEPS[config.cell]
    source_ids = np.asarray(source_ids)
    batch, length = source_ids.shape
    lengths = (source_ids != 0).sum(axis=1)
    parts = 2 if config.cell == "lstm" else 1
    x = weights[f"{prefix}/embedding/embeddings"][source_ids]
    directions = ("forward", "backward") if config.bidirectional else ("forward",)
    for layer in range(config.encoder_layers):
        sequences, finals = [], []
        for direction in directions:
            cell = f"{prefix}/layer_{layer}_{direction}"
            outputs = np.zeros((batch, length, config.units))
            final = np.zeros((parts, batch, config.units))
            for b in range(batch):
                state = tuple(np.zeros((1, config.units)) for _ in range(parts))
                positions = range(lengths[b])
                for s in positions if direction == "forward" else reversed(positions):
                    state = step(x[b:b + 1, s], state, weights, cell)
                    outputs[b, s] = state[0][0]
                final[:, b] = np.concatenate(state)
            sequences.append(outputs)
            finals.append(final)
        if len(directions) == 1:
            x, final_state = sequences[0], finals[0]
        elif config.merge_mode == "concat":
            x = np.concatenate(sequences, axis=-1)
            final_state = np.concatenate(finals, axis=-1)
        else:
            x, final_state = sequences[0] + sequences[1], finals[0] + finals[1]
    return x, tuple(final_state)


def _block_view(block):
    """The block as `numpy_transformer.parameters` reads it: its weights below its own
    path (`.../encoder/block_0/self_attention/W_q` -> `self_attention/W_q`)."""
    path = block.weights[0].path
    name = path[: path.index(f"/{block.name}/")] + f"/{block.name}"
    return SimpleNamespace(name=name, weights=block.weights, num_heads=block.num_heads)


def cascade_encoder(model, source_ids):
    """The cascade encoder of a `Seq2Seq` (its config and weights are read).

    Returns:
        dict of float64 arrays: `annotations` `(B, S, embedding_dim)` (zero at
        padding), `final_state` (the recurrent layers'), `recurrent` `(B, S, R)` and
        `first_weights` `(B, heads, S, S)`, the first block's self-attention weights.
    """
    config = model.config
    weights = model_weights(model)
    mask = np.asarray(source_ids) != 0
    recurrent, final_state = recurrent_encoder(weights, config, source_ids)
    x = recurrent
    if config.recurrent_dim != config.embedding_dim:
        x = x @ weights["encoder/projection/kernel"] + weights["encoder/projection/bias"]
    views = [_block_view(block) for block in model.encoder.blocks]
    first = parameters(views[0])
    query = x
    if config.norm == "pre":
        query = layer_norm(x, first["self_attention_norm/gamma"],
                           first["self_attention_norm/beta"])
    allowed = np.broadcast_to(mask[:, None, :], (x.shape[0], x.shape[1], x.shape[1]))
    _, first_weights = multi_head(first, "self_attention", config.heads, query, query, allowed)
    for view in views:
        x = encoder_block(view, x, mask, config.norm, config.activation)
    if config.norm == "pre":
        x = layer_norm(x, weights["encoder/final_norm/gamma"], weights["encoder/final_norm/beta"])
    return {"annotations": x * mask[:, :, None], "final_state": final_state,
            "recurrent": recurrent, "first_weights": first_weights}
