"""`attncli inspect-weights RUN`: look inside a trained model.

    --text "..."    translate it and print the attention matrix as a shaded table
    --input FILE    the same for every sentence of FILE (one per line)
    --png FILE      the same matrix as a labelled picture
    --png-dir DIR   one picture per sentence: DIR/1.png, DIR/2.png, ... numbered by
                    line (zero-padded to the same width), an empty line skipped
    --cell-weights  print each weight in its cell of the pictures (--decimals digits)
    --step T        the worked-example table of `score-demo` for output token T,
                    computed from the trained model: each source position's score,
                    softmax weight and weighted value, and the context
    --params        every weight tensor with its statistics, the attention's own first
    --attention cross|encoder|decoder, --layer L, --head H
                    which attention of a model with self-attention (see
                    `attncli.cli.inspect_self_attention`); --step then walks a query
                    of that head through x W_q, x W_k, x W_v, scores, softmax,
                    weighted values and sum

Everything asked for is printed to stdout (it is the result of the command).
"""

import dataclasses
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from attncli.cli import inspect_self_attention
from attncli.cli.fonts import glyph_notice
from attncli.cli.heatmap import heatmap_table, save_heatmap_png
from attncli.cli.render import check_decimals
from attncli.errors import AttncliError


def parameter_table(model, decimals=4):
    """A table of every weight: layer path, shape and summary statistics.

    The attention layer's matrices (W_a, W_q, W_k, v, ...) come first.
    """
    from layers import BaseAttention

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


def check_step(step, hypothesis):
    """Refuse a `--step` beyond the output tokens of `hypothesis`."""
    if not 1 <= step <= len(hypothesis.tokens):
        raise AttncliError(
            f"--step {step} is out of range: the translation has "
            f"{len(hypothesis.tokens)} output tokens (1..{len(hypothesis.tokens)})"
        )


def step_walk(loaded, translator, translation, hypothesis, step):
    """The attention computation of output token `step` (1-based), replayed.

    The decoder is run over the hypothesis's own tokens up to `step`; the query it
    built there is scored against the encoder states by the model's attention layer.

    Returns:
        dict of numpy arrays: `query`, `scores`, `weights`, `values`,
        `weighted_values`, `context`, and the token strings.
    """
    import tensorflow as tf

    from attncli.data.vocabulary import START

    check_step(step, hypothesis)
    model = loaded.model
    _, source_ids = translator.source_ids(tf.constant([translation.source]))
    memory, state = model.encode(source_ids)
    vocabulary = loaded.target_tokenizer.vocabulary
    previous = [START] + [vocabulary.id_of(token) for token in hypothesis.tokens]
    for t in range(step):
        before = state
        _, state, weights = model.decode_step(tf.constant([previous[t]]), state, memory)
    # Bahdanau attends from the state before the step; Luong from the RNN's new output.
    query = (before if model.config.decoder == "bahdanau" else state)[0]
    attention = model.decoder.attention
    scores = attention.score_projected(query[:, None, :], memory["projected_keys"])
    values = np.asarray(memory["values"][0])
    weights = np.asarray(weights[0])
    return {
        "query": np.asarray(query[0]),
        "scores": np.asarray(scores[0, 0]),
        "weights": weights,
        "values": values,
        "weighted_values": weights[:, None] * values,
        "context": (weights[:, None] * values).sum(axis=0),
        "source_tokens": list(translation.source_tokens),
        "output_token": hypothesis.tokens[step - 1],
        "previous_token": "<start>" if step == 1 else hypothesis.tokens[step - 2],
    }


def _short(vector, decimals, shown=4):
    head = ", ".join(f"{value:.{decimals}f}" for value in vector[:shown])
    more = ", …" if len(vector) > shown else ""
    return f"[{head}{more}] ‖{np.linalg.norm(vector):.{decimals}f}‖"


def step_table(walk, step, score_name, decimals=4):
    """The worked-example table of one output step, as `score-demo` lays it out."""
    table = Table(
        title=Text(
            f"output token {step} {walk['output_token']!r} "
            f"(after {walk['previous_token']!r}); score: {score_name}; "
            f"query {_short(walk['query'], decimals)}"
        ),
    )
    if "local" in score_name:
        table.caption = Text(
            "1. is the raw score of every position; 2. is the weight the model used: the "
            "softmax over the window only (local-p: times the Gaussian, so it sums below 1)"
        )
    table.add_column("s", justify="right")
    table.add_column("source token")
    table.add_column("encoder hidden h̄_s")
    table.add_column("1. score", justify="right")
    table.add_column("2. softmax", justify="right")
    table.add_column("3. alignment a_s·h̄_s")
    best = int(np.argmax(walk["weights"]))
    for s, token in enumerate(walk["source_tokens"]):
        style = "bold" if s == best else None
        table.add_row(
            str(s + 1), Text(token), _short(walk["values"][s], decimals),
            f"{walk['scores'][s]:.{decimals}f}", f"{walk['weights'][s]:.{decimals}f}",
            _short(walk["weighted_values"][s], decimals), style=style,
        )
    table.add_section()
    table.add_row("4. sum", "", "", "", f"{walk['weights'].sum():.{decimals}f}",
                  "context " + _short(walk["context"], decimals))
    return table


def _check_options(*, text, input_file, beam, png, png_dir, cell_weights, step, params,
                   decimals, attention, layer, head):
    """Refuse every bad combination and value of options before the model is loaded."""
    if text and input_file is not None:
        raise AttncliError("give --text or --input, not both")
    sentences = bool(text) or input_file is not None
    if png is not None and png_dir is not None:
        raise AttncliError("give --png FILE (one picture) or --png-dir DIR, not both")
    if png is not None and input_file is not None:
        raise AttncliError("--png saves one picture; with --input give --png-dir DIR "
                           "for one picture per sentence")
    if step is not None and input_file is not None:
        raise AttncliError("--step walks one sentence's step: use it with --text")
    if (png is not None or png_dir is not None or step is not None) and not sentences:
        raise AttncliError("--png, --png-dir and --step need the sentence to look at: "
                           "add --text \"...\" or --input FILE")
    if cell_weights and png is None and png_dir is None:
        raise AttncliError("--cell-weights prints the weights in a picture's cells: add "
                           "--png FILE or --png-dir DIR")
    chosen = [name for name, value in (("--attention", attention), ("--layer", layer),
                                       ("--head", head)) if value is not None]
    if chosen and not sentences:
        raise AttncliError(f"{chosen[0]} needs the sentence to look at: add --text \"...\"")
    if attention not in (None, "cross", "encoder", "decoder"):
        raise AttncliError(f"--attention {attention}: choose cross, encoder or decoder")
    for name, value in (("--layer", layer), ("--head", head)):
        if value is not None and value < 1:
            raise AttncliError(f"{name} must be >= 1, got {value}")
    if not (sentences or params):
        raise AttncliError(
            "nothing to inspect: give --text \"SENTENCE\" (with --png or --step), "
            "--input FILE and/or --params"
        )
    if beam is not None and beam < 1:
        raise AttncliError(f"--beam must be >= 1. Received: --beam={beam}")
    check_decimals(decimals)
    if step is not None and step < 1:
        raise AttncliError(f"--step counts output tokens from 1. Received: --step={step}")
    if png is not None:
        png = Path(png)
        if png.suffix.lower() != ".png":
            raise AttncliError(f"--png {png}: the picture is a PNG; name it with .png")
        if not png.parent.is_dir():
            raise AttncliError(f"--png {png}: no such folder {png.parent}")
    if png_dir is not None:
        png_dir = Path(png_dir)
        if png_dir.exists() and not png_dir.is_dir():
            raise AttncliError(f"--png-dir {png_dir} is a file; give a folder")
        if not png_dir.parent.is_dir():
            raise AttncliError(f"--png-dir {png_dir}: no such folder {png_dir.parent}")
    return chosen


def read_sentences(input_file):
    """The lines of `--input FILE` (UTF-8, one sentence per line), checked to hold one."""
    from attncli.cli.line_stream import decode_utf8
    from attncli.cli.translate_command import split_lines

    path = Path(input_file)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AttncliError(f"--input {path}: no such file") from None
    except OSError as error:
        raise AttncliError(f"--input {path}: cannot read it ({error.strerror})") from None
    lines = split_lines(decode_utf8(data, f"--input {path}"))
    if not any(line.strip() for line in lines):
        raise AttncliError(f"--input {path} has no sentence: give one sentence per line")
    return lines


def _matrix(loaded, translator, translation, chosen, attention, layer, head):
    """`(shown, selection)`: the `Matrix` to show for the translation's best hypothesis,
    and the self-attention `Selection` it came from (None for a recurrent decoder's)."""
    hypothesis = translation.hypotheses[0]
    if chosen or loaded.model.config.decoder == "self-attention":
        selection = inspect_self_attention.select(
            loaded, translator, translation, hypothesis, attention or "cross", layer
        )
        return inspect_self_attention.matrix(selection, attention or "cross", layer,
                                             head), selection
    return inspect_self_attention.Matrix(
        list(hypothesis.tokens), list(translation.source_tokens), hypothesis.weights,
        "attention weights", "output", "source",
    ), None


def _save_png(shown, path, caption, cell_decimals, option):
    """Write one picture; returns the characters no installed font has."""
    try:
        return save_heatmap_png(shown.columns, shown.rows, shown.weights, path,
                                title=caption, row_label=shown.row_label,
                                column_label=shown.column_label, cell_decimals=cell_decimals)
    except OSError as error:
        raise AttncliError(f"{option} {path}: cannot write it ({error.strerror})") from None


def inspect(*, run_path, text, beam, png, step, params, decimals, attention=None,
            layer=None, head=None, input_file=None, png_dir=None, cell_weights=False):
    """Run `attncli inspect-weights`; returns the process exit code."""
    from attncli.cli.translate_command import model_directory

    chosen = _check_options(
        text=text, input_file=input_file, beam=beam, png=png, png_dir=png_dir,
        cell_weights=cell_weights, step=step, params=params, decimals=decimals,
        attention=attention, layer=layer, head=head,
    )
    lines = [text] if text else (read_sentences(input_file) if input_file is not None else [])
    directory = model_directory(run_path)

    from attncli.search.loading import load_model

    loaded = load_model(directory)
    model = loaded.model
    shown = {}  # line number (1-based) -> (translation, Matrix, Selection)
    if lines:
        # Everything that can be refused is checked before any table is printed.
        # The run's own search (as `translate` uses it), with --beam if given.
        search = dataclasses.replace(
            loaded.search, beam_size=beam or loaded.search.beam_size, n_best=1
        )
        translator = loaded.translator(search)
        numbers = [number for number, line in enumerate(lines, start=1) if line.strip()]
        translations = translator.translate([lines[number - 1] for number in numbers])
        for number, translation in zip(numbers, translations):
            shown[number] = (translation, *_matrix(loaded, translator, translation, chosen,
                                                   attention, layer, head))
        # --step walks the recurrent decoder's own step, or a query of a self-attention.
        recurrent = attention in (None, "cross") and model.config.decoder != "self-attention"
        if step is not None:
            translation, _, selection = shown[1]
            if recurrent:
                check_step(step, translation.hypotheses[0])
            elif not 1 <= step <= len(selection.queries):
                raise AttncliError(
                    f"--step {step} is out of range: the {attention or 'cross'} attention "
                    f"has {len(selection.queries)} queries (1..{len(selection.queries)})"
                )
        if png_dir is not None:
            Path(png_dir).mkdir(exist_ok=True)
    # Piped output is not cut at 80 columns: the tables are the result.
    out = Console(width=None if sys.stdout.isatty() else 200)
    if params:
        out.print(parameter_table(model, decimals))
    if not lines:
        return 0
    search_name = "greedy" if search.beam_size == 1 else f"beam {search.beam_size}"
    missing = set()
    for number, (translation, matrix, _) in shown.items():
        hypothesis = translation.hypotheses[0]
        out.print(f"{translation.source}  →  {hypothesis.text}", highlight=False, markup=False)
        out.print(heatmap_table(
            matrix.columns, matrix.rows, matrix.weights, decimals=decimals,
            title=f"{matrix.title} ({search_name})", row_label=matrix.row_label,
            column_label=matrix.column_label,
        ))
        path, option = (png, "--png") if png is not None else (
            (Path(png_dir) / f"{number:0{len(str(len(lines)))}d}.png", "--png-dir")
            if png_dir is not None else (None, None)
        )
        if path is not None:
            missing.update(_save_png(
                matrix, path, f"{translation.source} → {hypothesis.text}\n{matrix.title}",
                decimals if cell_weights else None, option,
            ))
            out.print(f"saved {path}", highlight=False, markup=False)
    if missing:
        print(glyph_notice(sorted(missing)), file=sys.stderr)
    if step is None:
        return 0
    translation, _, selection = shown[1]
    if recurrent:
        walk = step_walk(loaded, translator, translation, translation.hypotheses[0], step)
        out.print(step_table(walk, step, f"{model.config.score}, {model.config.alignment}",
                             decimals))
    else:
        walk = inspect_self_attention.step_walk(model, selection, attention or "cross", layer,
                                                head, step)
        out.print(inspect_self_attention.walk_table(walk, step, attention or "cross",
                                                    decimals))
    return 0
