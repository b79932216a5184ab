"""`inspect-weights` for models with self-attention: every attention, layer and head.

    --attention cross|encoder|decoder   which attention: the decoder's over the source,
                                        the encoder's self-attention, the decoder's own
    --layer L, --head H                 its block (1-based, the last by default) and one
                                        head (the average over the heads by default)
    --step T                            query T walked through the steps of design note
                                        002: x W_q, x W_k, x W_v, scores, softmax,
                                        weighted values, sum

The weights come from the model run teacher-forced over the translation it emitted,
which gives what the search computed (tests check it).
"""

from typing import NamedTuple

import numpy as np
from rich.table import Table
from rich.text import Text

from attncli.errors import AttncliError

START_LABEL = "<start>"


class Matrix(NamedTuple):
    """One attention matrix with its labels: `weights` `(len(rows), len(columns))`."""

    rows: list
    columns: list
    weights: np.ndarray
    title: str
    row_label: str
    column_label: str


class Selection(NamedTuple):
    """The inputs of one attention of a translated sentence, teacher-forced."""

    source_ids: object
    target_in_ids: object
    queries: list  # the query tokens (rows)
    keys: list  # the key tokens (columns)
    maps: list  # per block, (1, heads, Tq, Tv)


def select(loaded, translator, translation, hypothesis, attention, layer):
    """The maps of `attention` for the hypothesis, checked against the model."""
    import tensorflow as tf

    from attncli.data.vocabulary import START

    model = loaded.model
    _, source_ids = translator.source_ids(tf.constant([translation.source]))
    vocabulary = loaded.target_tokenizer.vocabulary
    emitted = [vocabulary.id_of(token) for token in hypothesis.tokens]
    target_in_ids = tf.constant([[START] + emitted[:-1]], tf.int32)
    maps = model.attention_maps(source_ids, target_in_ids)[attention]
    if not maps:
        side = "encoder" if attention == "encoder" else "decoder"
        raise AttncliError(
            f"--attention {attention}: this model's {side} is recurrent and has no "
            "self-attention; use --attention cross"
        )
    if layer is not None and not 1 <= layer <= len(maps):
        raise AttncliError(
            f"--layer {layer} is out of range: the {attention} attention has "
            f"{len(maps)} layer{'s' if len(maps) > 1 else ''} (1..{len(maps)})"
        )
    source_tokens = list(translation.source_tokens)
    inputs = [START_LABEL] + list(hypothesis.tokens[:-1])
    queries, keys = {
        "cross": (list(hypothesis.tokens), source_tokens),
        "encoder": (source_tokens, source_tokens),
        "decoder": (list(hypothesis.tokens), inputs),
    }[attention]
    return Selection(source_ids, target_in_ids, queries, keys, [np.asarray(m) for m in maps])


def matrix(selection, attention, layer, head):
    """The weights of block `layer` (1-based, None: the last), head `head` (None: the
    mean over the heads), as a `Matrix`."""
    maps = selection.maps
    index = (layer or len(maps)) - 1
    heads = maps[index].shape[1]
    if head is not None and not 1 <= head <= heads:
        raise AttncliError(
            f"--head {head} is out of range: the {attention} attention has {heads} "
            f"head{'s' if heads > 1 else ''} (1..{heads})"
        )
    weights = maps[index][0]
    weights = weights.mean(axis=0) if head is None else weights[head - 1]
    shown = f"layer {index + 1} of {len(maps)}, " + (
        f"head {head} of {heads}" if head is not None else f"mean of {heads} heads"
    )
    names = {"cross": "cross-attention", "encoder": "encoder self-attention",
             "decoder": "decoder self-attention"}
    rows, columns = selection.queries, selection.keys
    weights = weights[: len(rows), : len(columns)]
    column_label = "source" if attention != "decoder" else "decoder input"
    row_label = "source" if attention == "encoder" else "output"
    return Matrix(rows, columns, weights, f"{names[attention]} weights ({shown})",
                  row_label, column_label)


def _block_inputs(model, selection, attention, index):
    """`(query_input, key_value_input, attention_layer)` of block `index`: what the
    attention sublayer reads (after its LayerNorm with pre-norm)."""
    import tensorflow as tf

    source_ids, target_in_ids = selection.source_ids, selection.target_in_ids
    encoder = model.encoder
    if attention == "encoder":
        mask = tf.not_equal(source_ids, 0)
        x = encoder.embed(source_ids)
        for block in encoder.blocks[:index]:
            x = block(x, mask)
        block = encoder.blocks[index]
        query = block.sublayer_input(x, block.self_attention_norm)
        return query, query, block.self_attention
    values, _, source_mask = encoder(source_ids)
    decoder = model.decoder
    memory = decoder.memory(values, source_mask)
    target_mask = tf.not_equal(target_in_ids, 0)
    x = decoder.embed(target_in_ids)
    for n, block in enumerate(decoder.blocks[:index]):
        x, _, _ = block(x, target_mask, memory["cross_keys"][n], memory["cross_values"][n],
                        source_mask)
    block = decoder.blocks[index]
    query = block.sublayer_input(x, block.self_attention_norm)
    if attention == "decoder":
        return query, query, block.self_attention
    attended = block.self_attention.attend(query, query, query, value_mask=target_mask,
                                           use_causal_mask=True)
    x = block.sublayer_output(x, attended, block.self_attention_norm, training=False)
    return block.sublayer_input(x, block.cross_attention_norm), values, block.cross_attention


def step_walk(model, selection, attention, layer, head, step):
    """Query `step` (1-based) of one head through the attention's steps.

    Returns a dict of numpy arrays: `x` (the query's input row), `inputs` (the key
    and value inputs), `query` (`x W_q + b_q`), `keys`, `values` (per position),
    `scores` (the layer's score of this head), `weights` (the masked softmax),
    `weighted_values`, `context` (their sum, the head's output before `W_o`), and
    the labels.
    """
    if not 1 <= step <= len(selection.queries):
        raise AttncliError(
            f"--step {step} is out of range: the {attention} attention has "
            f"{len(selection.queries)} queries (1..{len(selection.queries)})"
        )
    index = (layer or len(selection.maps)) - 1
    head_index = (head or 1) - 1
    query_input, key_input, layer_object = _block_inputs(model, selection, attention, index)
    width = layer_object.key_dim
    columns = slice(head_index * width, (head_index + 1) * width)
    x = np.asarray(query_input[0, step - 1], "float64")
    inputs = np.asarray(key_input[0, : len(selection.keys)], "float64")

    def project(array, name):
        kernel = np.asarray(getattr(layer_object, f"W_{name}"), "float64")[:, columns]
        bias = getattr(layer_object, f"b_{name}")
        return array @ kernel + (0.0 if bias is None else np.asarray(bias)[columns])

    scores = np.asarray(layer_object.score_projected(
        query_input[:, step - 1 : step], layer_object.project_keys(key_input)
    ))[0, head_index, 0, : len(selection.keys)]
    weights = selection.maps[index][0, head_index, step - 1, : len(selection.keys)]
    values = project(inputs, "v")
    weighted = weights[:, None] * values
    return {
        "x": x, "inputs": inputs, "query": project(x, "q"), "keys": project(inputs, "k"),
        "values": values, "scores": scores, "weights": np.asarray(weights, "float64"),
        "weighted_values": weighted, "context": weighted.sum(axis=0),
        "score": layer_object.score_name, "key_dim": width,
        "query_token": selection.queries[step - 1], "key_tokens": selection.keys,
        "head": head_index + 1, "layer": index + 1,
    }


def _short(vector, decimals, shown=4):
    head = ", ".join(f"{value:.{decimals}f}" for value in vector[:shown])
    more = ", …" if len(vector) > shown else ""
    return f"[{head}{more}] ‖{np.linalg.norm(vector):.{decimals}f}‖"


def walk_table(walk, step, attention, decimals=3):
    """The walk as one table, its columns numbered like design note 002's steps."""
    formula = {"scaled_dot": f"q · k / √{walk['key_dim']}", "dot": "q · k"}.get(
        walk["score"], f"{walk['score']} score of (q, k)"
    )
    table = Table(title=Text(
        f"{attention} attention, layer {walk['layer']}, head {walk['head']}: query {step} "
        f"{walk['query_token']!r}\n1. input x {_short(walk['x'], decimals)}\n"
        f"2. query q = x W_q + b_q {_short(walk['query'], decimals)}"
    ))
    table.caption = Text(
        f"4. score = {formula}; 5. softmax over the positions it may see; 6. weight × "
        "value; 7. their sum is the head's output (before W_o); 8. every other query "
        "repeats 4-7 (the rows of the matrix above)"
    )
    for name in ("s", "token", "input x_s", "3. key x_s W_k + b_k",
                 "3. value x_s W_v + b_v", "4. score", "5. softmax", "6. weighted value"):
        table.add_column(name, justify="right" if name in ("s", "4. score", "5. softmax")
                         else "left")
    best = int(np.argmax(walk["weights"]))
    for s, token in enumerate(walk["key_tokens"]):
        masked = walk["weights"][s] == 0  # a padded or (causally) later position
        table.add_row(
            str(s + 1), Text(token), _short(walk["inputs"][s], decimals),
            _short(walk["keys"][s], decimals), _short(walk["values"][s], decimals),
            f"{walk['scores'][s]:.{decimals}f}", f"{walk['weights'][s]:.{decimals}f}",
            _short(walk["weighted_values"][s], decimals),
            style="bold" if s == best else ("dim" if masked else None),
        )
    table.add_section()
    table.add_row("7. sum", "", "", "", "", "", f"{walk['weights'].sum():.{decimals}f}",
                  "output " + _short(walk["context"], decimals))
    return table
