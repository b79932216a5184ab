"""The terminal renderer of attention steps: `inspect-weights --step` and `score-demo`.

Both show `attncli.model.trace.AttentionStep`s, one query of one attention labelled
with the record its layer kept (`layers.AttentionRecord`), through one table,
`step_section`: a row per key with its score, softmax weight (local-p: the Gaussian
and the weight) and weighted value, then their sum, the context. Which columns it
has follows the record (the keys' inputs of a layer that projects them, the values
where they differ from the keys, the score's key term where it has one, local-p's
Gaussian); what the table calls its parts (`StepNames`) follows who shows it:
score-demo the articles' words, inspect-weights the papers'.

A table is a `Section`, printed as a Rich table (`print_section`) or as Markdown;
`score-demo` adds the sections of its walk (the inputs, the layer's weights) and can
print the walk as JSON. An array whose entries are all whole numbers prints as
integers (`[10, 5, 10]`, score `15`); any other array prints every entry with
`decimals` digits, so a weight that is tiny but not zero reads `0.0000`, while a
masked key's weight, exactly zero, reads `0`. A model's vectors are long: they show
their first components and their norm (`short`).
"""

import json
import os
import re
from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from attncli.cli.tables import print_fitted
from attncli.errors import AttncliError
from attncli.scores import SCORES

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


@dataclass(frozen=True)
class StepNames:
    """What a step table calls the parts of a step.

    Attributes:
        query: what the query vector is, before it in the title.
        key: the keys' column. value: the values' (shown where they differ).
        weighted: the weighted values' column, after its number.
        context: what the context is, before it in the sum row.
        first: the number of the score column (1; 4 after the input, query and
            key/value projections of a layer that makes them).
        token: the keys' tokens' column, or None for keys without tokens.
        input: the query's input line of a layer that projects it, or None.
        key_input: the keys' inputs' column of such a layer, or None.
        projection: whether the score's key term (`k W_a`, the record's
            `projected_keys`) has a column of its own.
        caption: what the table says under it, or "".
    """

    query: str
    key: str
    value: str
    weighted: str
    context: str
    first: int = 1
    token: str | None = None
    input: str | None = None
    key_input: str | None = None
    projection: bool = False
    caption: str = ""


# score-demo's, in the words of the articles whose examples it walks.
SEQ2SEQ_NAMES = StepNames(query="decoder hidden", key="encoder hidden", value="value",
                          weighted="alignment", context="context", projection=True)
SELF_ATTENTION_NAMES = StepNames(query="query", key="key", value="value",
                                 weighted="weighted value", context="output", first=4,
                                 projection=True)

# inspect-weights', in the papers' words: a recurrent decoder's attention and the
# alignment layer (one query over the encoder states), and one head of a block.
DECODER_NAMES = StepNames(query="query", key="encoder hidden h̄_s", value="value",
                          weighted="alignment a_s·h̄_s", context="context",
                          token="source token")
HEAD_NAMES = StepNames(
    query="2. query q = x W_q + b_q", key="3. key x_s W_k + b_k",
    value="3. value x_s W_v + b_v", weighted="weighted value", context="output", first=4,
    token="token", input="1. input x", key_input="input x_s",
    caption="5. softmax over the positions it may see; 6. weight × value; 7. their sum "
            "is the head's output (before W_o); 8. every other query repeats 4-7 (the "
            "rows of the matrix above)",
)


@dataclass
class Section:
    """A titled table: `rows` of cells (a cell is a string or a list of lines);
    `dimmed` holds the indices of the rows of keys that get no weight, `best` the
    row of the largest weight; `left` the columns aligned left (words, and a model's
    vectors, read from their first component), the others are aligned right."""

    title: str
    columns: list
    rows: list = field(default_factory=list)
    description: str = ""
    dimmed: set = field(default_factory=set)
    total: bool = False  # the last row sums the rows above it
    best: int | None = None
    caption: str = ""
    keep: int = 1  # the label columns repeated when a wide table is cut into blocks
    left: set = field(default_factory=lambda: {""})


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


class ShortFormatter:
    """A model's vectors: `[v_1, .., v_4, …] ‖v‖`, their first components and norm."""

    shown = 4

    def __init__(self, array, decimals):
        self.decimals = decimals

    def vector(self, values):
        head = ", ".join(f"{value:.{self.decimals}f}" for value in values[:self.shown])
        more = ", …" if len(values) > self.shown else ""
        return f"[{head}{more}] ‖{np.linalg.norm(values):.{self.decimals}f}‖"


def vector(values, decimals):
    """`[a, b, c]` with the formatting rule of this module, for one vector alone."""
    return Formatter(values, decimals).vector(values)


def step_section(step, decimals, names, heading="", short=False, valid_keys=None):
    """The table of one `AttentionStep`: a row per key, then the sum.

    Args:
        step: the `AttentionStep`.
        decimals: digits after the point.
        names: the `StepNames` of its parts.
        heading: what the title says before the query (and its input).
        short: show vectors by their first components and norm (`ShortFormatter`).
        valid_keys: how many keys are not padding (None: all), to say why a key is
            masked: padding, or outside a local window.
    """
    record = step.record
    first = names.first
    left = {names.token}

    def vectors(header, array):
        formatter = (ShortFormatter if short else Formatter)(array, decimals)
        if short:
            left.add(header)
        return header, lambda s: formatter.vector(array[s])

    def numbers(header, array, masked_zero=False):
        formatter = Formatter(array, decimals)
        return header, lambda s: ("0" if masked_zero and not record.mask[s]
                                  else formatter.number(array[s]))

    def label(s):
        return str(s + 1) if record.mask[s] else f"{s + 1} {_why_masked(step, s, valid_keys)}"

    # One (header, cell of key s) per column, in the order of the computation.
    columns = [("s", label)]
    if names.token is not None:
        columns.append((names.token, lambda s: step.key_tokens[s]))
    if names.key_input is not None and record.key_input is not None:
        columns.append(vectors(names.key_input, record.key_input))
    columns.append(vectors(names.key, record.keys))
    if not np.array_equal(record.keys, record.values):
        columns.append(vectors(names.value, record.values))
    projection = SCORES[step.kind.score].projection
    if names.projection and projection is not None:
        columns.append(vectors(projection, record.projected_keys))
    columns += [numbers(f"{first}. score", record.scores),
                numbers(f"{first + 1}. softmax", record.softmax, masked_zero=True)]
    if record.gaussian is not None:
        columns += [numbers("gaussian", record.gaussian),
                    numbers("weight", record.weights, masked_zero=True)]
    weighted = record.weighted_values()
    columns.append(vectors(f"{first + 2}. {names.weighted}", weighted))

    query = [vectors(names.query, record.query[None])]
    if names.input is not None and record.query_input is not None:
        query.insert(0, vectors(names.input, record.query_input[None]))
    description = f"score(q, k) = {step.formula}"
    if record.aligned_positions is not None:
        centre = Formatter(record.aligned_positions, decimals).number(record.aligned_positions)
        description += f"; here p_t = {centre}, D = {step.kind.window}"
    section = Section(heading + "\n".join(f"{name} {cell(0)}" for name, cell in query),
                      [header for header, _ in columns], description=description,
                      total=True, best=int(np.argmax(record.weights)),
                      caption=names.caption, keep=2 if names.token is not None else 1,
                      left=left)
    for s in range(len(record.keys)):
        if not record.mask[s]:
            section.dimmed.add(s)
        section.rows.append([cell(s) for _, cell in columns])
    # The sum row: the weights' sum under the last weight column, then the context.
    total = [f"{first + 3}. sum"] + [""] * (len(columns) - 3)
    total.append(Formatter(record.weights, decimals).number(record.weights.sum()))
    _, context = vectors(names.context, record.context[None])
    total.append(f"{names.context} {context(0)}")
    section.rows.append(total)
    return section


def model_step_section(step, decimals, previous_token=None):
    """The `step_section` of a model's step (`inspect-weights --step`): a recurrent
    decoder's or the alignment layer's laid out as the seq2seq example (its title
    names the output token and `previous_token`, the token read before it), a head
    of a block as the self-attention example."""
    if step.head is None:
        named = "alignment layer: " if step.attention == "alignment" else ""
        heading = (f"{named}output token {step.step} {step.query_token!r} "
                   f"(after {previous_token!r}); score: {step.kind.label}; ")
        return step_section(step, decimals, DECODER_NAMES, heading, short=True)
    heading = (f"{step.attention} attention, layer {step.layer}, head {step.head}: "
               f"query {step.step} {step.query_token!r}\n")
    return step_section(step, decimals, HEAD_NAMES, heading, short=True)


def _why_masked(step, s, valid_keys):
    if valid_keys is not None and s >= valid_keys:
        return "(masked)"
    if step.kind.local:
        return "(outside window)"
    return "(later position)" if step.attention == "decoder" else "(masked)"


def _numbered(name, index, count):
    return name if count == 1 else f"{name} {index + 1}"


def sections(walk, decimals):
    """The tables that walk through `walk` (a score-demo `Walk`), in the order of the
    computation."""
    if walk.source is not None:
        return _self_attention_sections(walk, decimals)
    return _score_sections(walk, decimals)


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


def print_section(console, section):
    """Print `section` on `console`: its description, then its table, cut into blocks
    of columns where it is wider than the console (`print_fitted`)."""
    if section.description:
        console.print(Text(section.description, style="italic"), soft_wrap=True)
    table = Table(title=Text(section.title), title_justify="left",
                  caption=Text(section.caption) if section.caption else None)
    for column in section.columns:
        table.add_column(Text(column), justify="left" if column in section.left else "right")
    for index, row in enumerate(section.rows):
        style = "dim" if index in section.dimmed else (
            "bold" if index == section.best else None)
        table.add_row(
            *(Text("\n".join(cell) if isinstance(cell, list) else cell) for cell in row),
            style=style, end_section=section.total and index == len(section.rows) - 2,
        )
    print_fitted(console, table, keep=section.keep)


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
