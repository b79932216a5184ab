"""Show a `Walk` as Rich tables, as Markdown, or as JSON.

Tables and Markdown share one layout (`sections`): a list of titled tables whose
cells are already formatted. An array whose entries are all whole numbers prints as
integers (`[10, 5, 10]`, score `15`); any other array prints every entry with
`decimals` digits, so a weight that is tiny but not zero reads `0.0000`, while a
masked key's weight, exactly zero, reads `0`.
"""

import json
import os
import re
from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from attncli.errors import AttncliError

PIPED_WIDTH = 160

# Digits after the point in every table attncli prints (score-demo, inspect-weights):
# float32 figures carry about 7 significant digits; more only prints noise.
MAX_DECIMALS = 12


def check_decimals(decimals):
    """Refuse a `--decimals` outside `0..MAX_DECIMALS`, in the same words for every command."""
    if not 0 <= decimals <= MAX_DECIMALS:
        raise AttncliError(
            f"--decimals {decimals} is out of range; use 0 to {MAX_DECIMALS}"
        )

LABELS = {
    "seq2seq": {
        "query": "decoder hidden",
        "key": "encoder hidden",
        "weighted": "alignment",
        "context": "context",
    },
    "self-attention": {
        "query": "query",
        "key": "key",
        "weighted": "weighted value",
        "context": "output",
    },
}


@dataclass
class Section:
    """A titled table: `rows` of cells (a cell is a string or a list of lines);
    `dimmed` holds the indices of the rows of keys that get no weight."""

    title: str
    columns: list
    rows: list = field(default_factory=list)
    description: str = ""
    dimmed: set = field(default_factory=set)
    total: bool = False  # the last row sums the rows above it


class Formatter:
    """Formats the entries of one array consistently (see the module docstring)."""

    def __init__(self, array, decimals):
        array = np.asarray(array, dtype="float64")
        self.decimals = decimals
        self.whole = bool(np.all(np.abs(array) < 1e15) and np.all(array == np.round(array)))

    def number(self, value):
        decimals = 0 if self.whole else self.decimals
        return f"{float(value):.{decimals}f}"

    def vector(self, values):
        return "[" + ", ".join(self.number(value) for value in values) + "]"


def vector(values, decimals):
    """`[a, b, c]` with the formatting rule of this module, for one vector alone."""
    return Formatter(values, decimals).vector(values)


def sections(walk, decimals):
    """The tables that walk through `walk`, in the order of the computation."""
    if walk.source is not None:
        return _self_attention_sections(walk, decimals)
    return _score_sections(walk, decimals)


def _score_sections(walk, decimals):
    labels = LABELS[walk.example]
    inputs = walk.inputs
    values_differ = not np.array_equal(inputs.keys, inputs.values)
    query_format = Formatter(inputs.query, decimals)
    key_format = Formatter(inputs.keys, decimals)
    value_format = Formatter(inputs.values, decimals)

    table = Section("0. Inputs", ["", "vector"])
    for t, query in enumerate(inputs.query):
        table.rows.append([_numbered(labels["query"], t, len(inputs.query)),
                           query_format.vector(query)])
    for s, key in enumerate(inputs.keys):
        name = f"{labels['key']} {s + 1}" + ("" if values_differ else " (key = value)")
        table.rows.append([name, key_format.vector(key)])
    if values_differ:
        for s, value in enumerate(inputs.values):
            table.rows.append([f"value {s + 1}", value_format.vector(value)])
    result = [table]

    if walk.parameters:
        result.append(_parameter_section("Learned parameters", walk.parameters, decimals))

    result.extend(
        _step_section(walk, t, decimals, labels, values_differ, first_step=1)
        for t in range(len(inputs.query))
    )
    return result


def _step_section(walk, t, decimals, labels, values_differ, first_step):
    """The table of query `t`: one row per key, then the sum. Its score, softmax,
    weighted value and sum columns are numbered from `first_step`, as the example's
    article numbers its steps.

    The query, keys, values, weights, weighted values and context are the query's
    step record (`Walk.step`), the one inspect-weights renders; the score column
    shows a masked key's score too (the record's is -inf), with the softmax and
    local-p's Gaussian beside it."""
    inputs = walk.inputs
    step = walk.step(t)
    weighted = step.weighted_values()
    columns = ["s", labels["key"]]
    if values_differ:
        columns.append("value")
    if walk.projected_keys is not None:
        columns.append(walk.projection)
    columns += [f"{first_step}. score", f"{first_step + 1}. softmax"]
    if walk.gaussian is not None:
        columns += ["gaussian", "weight"]
    columns.append(f"{first_step + 2}. {labels['weighted']}")

    formats = {
        "key": Formatter(inputs.keys, decimals),
        "value": Formatter(inputs.values, decimals),
        "score": Formatter(walk.scores, decimals),
        "softmax": Formatter(walk.softmax, decimals),
        "weight": Formatter(walk.weights, decimals),
        "weighted": Formatter(walk.weighted_values, decimals),
        "context": Formatter(walk.context, decimals),
    }
    if walk.projected_keys is not None:
        formats["projected"] = Formatter(walk.projected_keys, decimals)
    if walk.gaussian is not None:
        formats["gaussian"] = Formatter(walk.gaussian, decimals)

    title = f"{labels['query']} {Formatter(inputs.query, decimals).vector(step.query)}"
    description = walk.formula
    if walk.window_centres is not None:
        centre = Formatter(walk.window_centres, decimals).number(walk.window_centres[t])
        description += f"; here p_t = {centre}, D = {walk.window}"
    section = Section(title, columns, description=description, total=True)
    for s in range(len(inputs.keys)):
        allowed = bool(np.isfinite(step.scores[s]))
        label = str(s + 1) if allowed else f"{s + 1} {_why_masked(walk, s)}"
        row = [label, formats["key"].vector(step.keys[s])]
        if values_differ:
            row.append(formats["value"].vector(step.values[s]))
        if walk.projected_keys is not None:
            row.append(formats["projected"].vector(walk.projected_keys[s]))
        row.append(formats["score"].number(walk.scores[t, s]))
        row.append(_weight_cell(formats["softmax"], walk.softmax[t, s], allowed))
        if walk.gaussian is not None:
            row.append(formats["gaussian"].number(walk.gaussian[t, s]))
            row.append(_weight_cell(formats["weight"], step.weights[s], allowed))
        row.append(formats["weighted"].vector(weighted[s]))
        if not allowed:
            section.dimmed.add(len(section.rows))
        section.rows.append(row)
    total = [f"{first_step + 3}. sum"] + [""] * (len(columns) - 2)
    total.append(f"{labels['context']} {formats['context'].vector(step.context)}")
    section.rows.append(total)
    return section


def _weight_cell(formatter, value, allowed):
    return formatter.number(value) if allowed else "0"


def _why_masked(walk, s):
    if walk.inputs.valid_length is not None and s >= walk.inputs.valid_length:
        return "(masked)"
    return "(outside window)"


def _numbered(name, index, count):
    return name if count == 1 else f"{name} {index + 1}"


def _parameter_section(title, parameters, decimals):
    section = Section(title, ["weight", "shape", "value"])
    for name, value in parameters.items():
        formatter = Formatter(value, decimals)
        lines = (
            [formatter.vector(row) for row in value] if value.ndim == 2
            else [formatter.vector(value)]
        )
        section.rows.append([name, str(tuple(value.shape)), lines])
    return section


def _self_attention_sections(walk, decimals):
    inputs = walk.inputs
    source_format = Formatter(walk.source, decimals)
    result = [Section("1. Inputs", ["input", "x"], rows=[
        [f"Input {i + 1}", source_format.vector(x)] for i, x in enumerate(walk.source)
    ])]
    ordered = {name: walk.parameters[name] for name in ("W_k", "W_q", "W_v")}
    result.append(_parameter_section("2. Weights", ordered, decimals))
    products = Section(
        "3. Keys, queries and values", ["input", "key = x W_k", "query = x W_q",
                                        "value = x W_v"]
    )
    formats = [Formatter(array, decimals) for array in
               (inputs.keys, inputs.query, inputs.values)]
    for i in range(len(walk.source)):
        products.rows.append(
            [f"Input {i + 1}"] + [
                formatter.vector(array[i]) for formatter, array in
                zip(formats, (inputs.keys, inputs.query, inputs.values))
            ]
        )
    result.append(products)

    labels = LABELS["self-attention"]
    for t in range(len(inputs.query)):
        section = _step_section(walk, t, decimals, labels, values_differ=True, first_step=4)
        section.title = f"Input {t + 1}, " + section.title
        result.append(section)
    outputs = Formatter(walk.context, decimals)
    result.append(Section("8. Outputs: steps 4-7 for every input", ["input", "output"], rows=[
        [f"Input {i + 1}", outputs.vector(output)] for i, output in enumerate(walk.context)
    ]))
    return result


def notes(walk, decimals):
    """Sentences about the figures: where the example's article rounded, what is tiny
    but not 0."""
    result = []
    if walk.article is not None:
        exact_weights = walk.softmax[0]
        article_weights = np.asarray(walk.article.weights, dtype="float64")
        if not np.array_equal(exact_weights, article_weights):
            scores = Formatter(walk.scores[0], decimals).vector(walk.scores[0])
            result.append(
                f"{walk.article.source} rounds softmax({scores}) to "
                f"{vector(walk.article.weights, 1)}; exactly it is "
                f"{_precise(exact_weights, decimals)}, so {_output_name(walk)} is "
                f"{_precise(walk.context[0], decimals)}, not "
                f"{vector(walk.article.context, 1)}."
            )
    allowed_weights = walk.softmax[walk.allowed]
    tiny = allowed_weights[(allowed_weights != 0) & (allowed_weights < 0.5 * 10.0 ** -decimals)]
    if tiny.size:
        result.append(
            f"A softmax weight is never exactly 0 for a key that may be attended to: the "
            f"smallest here is {float(tiny.min()):.2e}, shown as "
            f"{0:.{decimals}f}; only masked keys get exactly 0."
        )
    return result


def _output_name(walk):
    return "output 1" if walk.source is not None else "the context"


def _precise(values, decimals):
    """A vector with `decimals` digits, writing tiny non-zero entries in e-notation."""
    parts = []
    for value in np.asarray(values, dtype="float64"):
        if value != 0 and abs(value) < 0.5 * 10.0 ** -decimals:
            parts.append(f"{value:.1e}")
        else:
            parts.append(f"{value:.{decimals}f}")
    return "[" + ", ".join(parts) + "]"


def render(walk, output_format, decimals):
    """The walk as text in `output_format`: `"table"`, `"markdown"` or `"json"`."""
    if output_format == "json":
        return to_json(walk, decimals)
    if output_format == "markdown":
        return markdown(walk, decimals)
    return tables(walk, decimals)


def tables(walk, decimals):
    """The walk as Rich tables, with colour when stdout is a terminal.

    Piped output is laid out 160 columns wide (not Rich's 80) unless COLUMNS is set,
    so that the vectors of a saved run are not broken across lines.
    """
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=PIPED_WIDTH)
    with console.capture() as capture:
        _print_tables(console, walk, decimals)
    return capture.get()


def _print_tables(console, walk, decimals):
    console.print(Text(_heading(walk), style="bold"))
    for section in sections(walk, decimals):
        console.print()
        if section.description:
            console.print(Text(section.description, style="italic"), soft_wrap=True)
        table = Table(title=Text(section.title), title_justify="left")
        for column in section.columns:
            table.add_column(Text(column), justify="right" if column else "left")
        for index, row in enumerate(section.rows):
            table.add_row(
                *(Text("\n".join(cell) if isinstance(cell, list) else cell) for cell in row),
                style="dim" if index in section.dimmed else None,
                end_section=section.total and index == len(section.rows) - 2,
            )
        console.print(table)
    for note in notes(walk, decimals):
        console.print(Text(f"Note: {note}"), soft_wrap=True)


def markdown(walk, decimals):
    """The walk as Markdown: a heading, one pipe table per section, the notes."""
    lines = [f"### {_heading(walk)}", ""]
    for section in sections(walk, decimals):
        lines += [f"**{section.title}**", ""]
        if section.description:
            lines += [f"`{section.description}`", ""]
        lines.append("| " + " | ".join(section.columns) + " |")
        lines.append("|" + "|".join("---" for _ in section.columns) + "|")
        for row in section.rows:
            cells = ("<br>".join(cell) if isinstance(cell, list) else cell for cell in row)
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += [f"> Note: {note}\n" for note in notes(walk, decimals)]
    return "\n".join(lines).rstrip() + "\n"


def to_json(walk, decimals):
    """The walk as JSON text with every intermediate array, at full float32 precision."""
    steps = {}
    if walk.source is not None:
        steps.update(queries=walk.inputs.query, keys=walk.inputs.keys,
                     values=walk.inputs.values)
    if walk.projected_keys is not None:
        steps["projected_keys"] = walk.projected_keys
    steps.update(
        scores=walk.scores,
        allowed=walk.allowed,
        softmax=walk.softmax,
        weights=walk.weights,
        weighted_values=walk.weighted_values,
        context=walk.context,
    )
    if walk.window_centres is not None:
        steps["window_centres"] = walk.window_centres
    if walk.gaussian is not None:
        steps["gaussian"] = walk.gaussian
    if walk.source is not None:
        inputs = {"inputs": walk.source}
    else:
        inputs = {
            "query": walk.inputs.query,
            "keys": walk.inputs.keys,
            "values": walk.inputs.values,
            "valid_length": walk.inputs.valid_length,
        }
    document = {
        "example": walk.example,
        "score": walk.score,
        "formula": walk.formula,
        "window": walk.window,
        "inputs": inputs,
        "parameters": walk.parameters,
        "steps": steps,
        "notes": notes(walk, decimals),
    }
    text = json.dumps(document, default=_plain, indent=2, ensure_ascii=False)
    return _INNERMOST_LIST.sub(_one_line, text) + "\n"


# A list of numbers or booleans that json.dumps spread over several lines (JSON
# strings hold no raw newline, so this never matches inside one).
_INNERMOST_LIST = re.compile(r"\[\n\s*([^\[\]{}\"]*?)\n\s*\]")


def _one_line(match):
    return "[" + ", ".join(item.strip() for item in match.group(1).split(",")) + "]"


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _heading(walk):
    if walk.source is not None:
        return f"Self-attention, step by step: the example of {walk.article.source}"
    return f"Attention with the {walk.score} score on {walk.inputs_name}"
