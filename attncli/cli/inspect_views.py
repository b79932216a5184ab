"""What `attncli inspect-weights` shows of a model: its weights' table, and each
sentence's view (`attncli.search.sentence_view.SentenceView`) with the matrix and the step
its options choose, refused in the words of the options.
"""

from pathlib import Path

import numpy as np
from rich.table import Table

from attncli.cli.line_stream import read_lines
from attncli.cli.runs import asked_decoding, translate_lines
from attncli.errors import AttncliError
from attncli.search.inspection import inspect_reference, inspect_sentence
from attncli.search.sentence_view import SelectionError


def parameter_table(model, decimals=4):
    """A table of every weight: layer path, shape and summary statistics.

    The attention layer's matrices (W_a, W_q, W_k, v, ...) come first.
    """
    from layers import BaseAttention  # imports Keras

    attention = {
        id(weight)
        for layer in model._flatten_layers() if isinstance(layer, BaseAttention)
        for weight in layer.weights
    }
    weights = sorted(model.weights, key=lambda weight: id(weight) not in attention)
    table = Table(title="model weights (attention first)")
    for name in ("weight", "shape", "mean", "std", "min", "max", "norm"):
        table.add_column(name, justify="left" if name in ("weight", "shape") else "right")
    for weight in weights:
        values = np.asarray(weight.numpy(), dtype="float64")
        table.add_row(
            weight.path,
            "×".join(str(size) for size in values.shape) or "scalar",
            *(
                f"{statistic:.{decimals}f}"
                for statistic in (
                    values.mean(), values.std(), values.min(), values.max(),
                    np.linalg.norm(values.ravel()),
                )
            ),
        )
    total = sum(int(np.prod(weight.shape)) for weight in model.weights)
    table.caption = f"{len(weights)} tensors, {total:,} parameters"
    return table


def read_sentences(input_file):
    """The lines of `--input FILE` (UTF-8, one sentence per line), checked to hold one."""
    path = Path(input_file)
    lines = read_lines(path, "--input")
    if not any(line.strip() for line in lines):
        raise AttncliError(f"--input {path} has no sentence: give one sentence per line")
    return lines


def inspection_decoding(loaded, beam):
    """The `Decoding` of the run's own search (as `translate` uses it), with `beam` if
    given, one hypothesis per sentence."""
    return asked_decoding(loaded.search, beam=beam, n_best=1)


def sentence_views(loaded, translator, lines, reference=None):
    """`{line number (1-based): SentenceView}` of the non-empty `lines`, each
    translated by `translator` (one batch) and inspected (`inspect_sentence`); with
    `reference`, the view of that translation of the one line (`inspect_reference`)."""
    if reference is not None:
        [line] = lines
        return {1: inspect_reference(loaded, translator, line, reference)}
    translations = translate_lines(translator, lines)
    return {number: inspect_sentence(loaded, translator, translation)
            for number, translation in enumerate(translations, start=1)
            if translation is not None}


def _option_error(error):
    """A `SelectionError` ("layer 3 is out of range ...") in the words of the options."""
    return AttncliError(f"--{error}")


def shown_matrix(view, attention, layer, head, words=False, gold=None):
    """The `Matrix` to show: the chosen attention, block and head of a model with
    self-attention (by default the mean of the last block's cross-attention heads), or
    a recurrent decoder's attention weights; in words with `words`, with the `gold`
    links (checked against the words) if given."""
    if gold is not None:
        view.check_gold(gold, "--gold")
    try:
        if attention or layer or head or view.model.self_attention_decoder:
            matrix = view.matrix(attention or "cross", layer, head, words, gold)
        else:
            cross = view.attention("cross")
            matrix = view.labelled(cross, cross.layers[0][0], "attention weights", words,
                                   gold)
    except SelectionError as error:
        raise _option_error(error) from None
    # Links join words: the token view stays the attention alone, as score-demo's is.
    return matrix if words else matrix._replace(links=frozenset())


def chosen_step(view, attention, layer, head, step):
    """The `AttentionStep` of `--step`, refused in the words of the options."""
    try:
        return view.step(attention or "cross", layer, head, step)
    except SelectionError as error:
        raise _option_error(error) from None
