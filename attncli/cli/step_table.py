"""The one table of an attention step: `inspect-weights --step` and `score-demo`.

Both show `attncli.model.trace.AttentionStep`s, one query of one attention labelled
with the record its layer kept (`layers.AttentionRecord`), through one table,
`step_section`: a row per key with its score, softmax weight (local-p: the Gaussian
and the weight) and weighted value, then their sum, the context. Which columns it
has follows the record (the keys' inputs of a layer that projects them, the values
where they differ from the keys, the score's key term where it has one, local-p's
Gaussian); what the table calls its parts (`StepNames`) follows who shows it:
score-demo the articles' words, inspect-weights the papers'.

A table is a `Section`, printed as a Rich table by `print_section` (`demo_render` also
writes it as Markdown). An array whose entries are all whole numbers prints as
integers (`[10, 5, 10]`, score `15`); any other array prints every entry with
`decimals` digits, so a weight that is tiny but not zero reads `0.0000`, while a
masked key's weight, exactly zero, reads `0`. A model's vectors are long: they show
their first components and their norm (`short`).
"""

from dataclasses import dataclass, field

import numpy as np
from rich.table import Table
from rich.text import Text

from attncli.cli.tables import print_fitted
from attncli.errors import AttncliError
from attncli.scores import SCORES

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
