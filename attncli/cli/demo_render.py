"""score-demo's walk (`attncli.cli.score_demo.Walk`) as Rich tables, Markdown or JSON.

The walk's sections, in the order of the computation: its inputs, the layer's
weights, then one step table per query (`attncli.cli.step_table.step_section`); the
self-attention example adds its keys, queries and values and its outputs. Notes under
the tables say where the example's article rounded and which weights are tiny but not
zero. JSON holds every intermediate array at full float32 precision.
"""

import json
import os
import re

import numpy as np
from rich.console import Console
from rich.text import Text

from attncli.cli.step_table import (
    SELF_ATTENTION_NAMES, SEQ2SEQ_NAMES, Formatter, Section, print_section, step_section,
    vector,
)
from attncli.scores import SCORES

# Piped output is laid out this wide unless COLUMNS is set (`tables`).
PIPED_WIDTH = 160


def sections(walk, decimals):
    """The tables that walk through `walk` (a score-demo `Walk`), in the order of the
    computation."""
    if walk.source is not None:
        return _self_attention_sections(walk, decimals)
    return _score_sections(walk, decimals)


def _numbered(name, index, count):
    return name if count == 1 else f"{name} {index + 1}"


def _score_sections(walk, decimals):
    inputs = walk.inputs
    values_differ = not np.array_equal(inputs.keys, inputs.values)
    query_format = Formatter(inputs.query, decimals)
    key_format = Formatter(inputs.keys, decimals)
    value_format = Formatter(inputs.values, decimals)

    table = Section("0. Inputs", ["", "vector"])
    for t, query in enumerate(inputs.query):
        table.rows.append([_numbered(SEQ2SEQ_NAMES.query, t, len(inputs.query)),
                           query_format.vector(query)])
    for s, key in enumerate(inputs.keys):
        name = f"{SEQ2SEQ_NAMES.key} {s + 1}" + ("" if values_differ else " (key = value)")
        table.rows.append([name, key_format.vector(key)])
    if values_differ:
        for s, value in enumerate(inputs.values):
            table.rows.append([f"value {s + 1}", value_format.vector(value)])
    result = [table]

    if walk.parameters:
        result.append(_parameter_section("Learned parameters", walk.parameters, decimals))

    result.extend(step_section(step, decimals, SEQ2SEQ_NAMES, valid_keys=inputs.valid_length)
                  for step in walk.steps())
    return result


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
    record = walk.record
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
    arrays = (record.keys, record.query, record.values)
    formats = [Formatter(array, decimals) for array in arrays]
    for i in range(len(walk.source)):
        products.rows.append(
            [f"Input {i + 1}"] + [formatter.vector(array[i])
                                  for formatter, array in zip(formats, arrays)]
        )
    result.append(products)
    for t, step in enumerate(walk.steps()):
        result.append(step_section(step, decimals, SELF_ATTENTION_NAMES, f"Input {t + 1}, "))
    outputs = Formatter(record.context, decimals)
    result.append(Section("8. Outputs: steps 4-7 for every input", ["input", "output"], rows=[
        [f"Input {i + 1}", outputs.vector(output)] for i, output in enumerate(record.context)
    ]))
    return result


def notes(walk, decimals):
    """Sentences about the figures: where the example's article rounded, what is tiny
    but not 0."""
    record = walk.record
    result = []
    if walk.article is not None:
        exact_weights = record.softmax[0]
        article_weights = np.asarray(walk.article.weights, dtype="float64")
        if not np.array_equal(exact_weights, article_weights):
            scores = Formatter(record.scores[0], decimals).vector(record.scores[0])
            result.append(
                f"{walk.article.source} rounds softmax({scores}) to "
                f"{vector(walk.article.weights, 1)}; exactly it is "
                f"{_precise(exact_weights, decimals)}, so {_output_name(walk)} is "
                f"{_precise(record.context[0], decimals)}, not "
                f"{vector(walk.article.context, 1)}."
            )
    allowed_weights = record.softmax[record.mask]
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
        console.print(Text(_heading(walk), style="bold"))
        for section in sections(walk, decimals):
            console.print()
            print_section(console, section)
        for note in notes(walk, decimals):
            console.print(Text(f"Note: {note}"), soft_wrap=True)
    return capture.get()


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
    record = walk.record
    steps = {}
    if walk.source is not None:
        steps.update(queries=record.query, keys=record.keys, values=record.values)
    if SCORES[walk.kind.score].projection is not None:
        steps["projected_keys"] = record.projected_keys
    steps.update(
        scores=record.scores,
        allowed=record.mask,
        softmax=record.softmax,
        weights=record.weights,
        weighted_values=record.weighted_values(),
        context=record.context,
    )
    if record.aligned_positions is not None:
        steps["window_centres"] = record.aligned_positions
    if record.gaussian is not None:
        steps["gaussian"] = record.gaussian
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
