"""What `attncli score-demo` is asked for: its options and the user's own numbers, checked.

Everything here is checked before TensorFlow is imported, so a mistake in the input is
reported at once, as an `AttncliError` that names the option or file key at fault.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from attncli.cli.demo_examples import ILLUSTRATED_SELF_ATTENTION, SEQ2SEQ, DemoInputs
from attncli.cli.step_table import check_decimals
from attncli.config.yaml_files import safe_load
from attncli.errors import AttncliError, clipped, shown
from attncli.scores import ALIGNMENTS, DEMO_SCORES, SCORES

EXAMPLES = ("seq2seq", "self-attention")

FORMATS = ("table", "markdown", "json")

INPUT_FILE_KEYS = ("query", "keys", "values", "valid_length", "parameters")

# The largest --units (hidden size of the concat, additive and local-p scores) and --seed.
MAX_UNITS = 4096
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class DemoRequest:
    """What `score-demo` was asked for, checked: an example and score, the inputs of a
    score walk (None for the self-attention example), and how to show the result."""

    example: str
    score: str
    inputs: DemoInputs | None
    seed: int = 0
    units: int | None = None
    window: int | None = None
    decimals: int = 4
    output_format: str = "table"


def check_choice(option, value, choices):
    """Return `value` if it is one of `choices`, else fail listing them."""
    if value not in choices:
        raise AttncliError(
            f"unknown {option} '{clipped(str(value))}'; choose one of: {', '.join(choices)}"
        )
    return value


def parse_matrix(text, option):
    """Numbers from the command line: `"10,5,10"` is one row, `;` separates rows.

    Returns a float32 array `(rows, columns)`.
    """
    if not text.strip():
        raise AttncliError(f"{option} is empty; give numbers like \"0,1,1;5,0,1\"")
    rows = [[_parse_number(item, option) for item in row.split(",")] for row in text.split(";")]
    return _rectangular(rows, option)


def _parse_number(item, option):
    item = item.strip()
    try:
        number = float(item)
    except ValueError:
        raise AttncliError(
            f"{option}: '{clipped(item)}' is not a number; write rows of numbers like "
            f"\"0,1,1;5,0,1\" (',' between numbers, ';' between rows)"
        ) from None
    if not math.isfinite(number):
        raise AttncliError(f"{option}: '{clipped(item)}' is not a finite number")
    return number


def _rectangular(rows, where):
    """float32 array from a list of rows of numbers, refusing ragged rows."""
    if not rows or all(len(row) == 0 for row in rows):
        raise AttncliError(f"{where} holds no numbers")
    width = len(rows[0])
    for index, row in enumerate(rows[1:], start=2):
        if len(row) != width:
            raise AttncliError(
                f"{where}: row {index} has {_numbers(len(row))} but row 1 has {width}; "
                f"every row needs the same count"
            )
    with np.errstate(over="ignore"):
        matrix = np.array(rows, dtype="float32")
    if not np.all(np.isfinite(matrix)):
        raise AttncliError(f"{where}: a number is too large for float32 (above 3.4e38)")
    return matrix


def _numbers(count):
    return f"{count} number" if count == 1 else f"{count} numbers"


def load_input_file(path):
    """Read a YAML file holding `query`, `keys`, optional `values`, `valid_length` and
    `parameters` (a mapping from weight name to matrix or vector).

    A vector is one row: `query: [10, 5, 10]` equals `query: [[10, 5, 10]]`.
    """
    path = Path(path)
    try:
        document = safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AttncliError(f"--input: no file '{path}'") from None
    except OSError as error:
        raise AttncliError(f"--input: cannot read '{path}': {error.strerror}") from None
    except UnicodeDecodeError:
        raise AttncliError(f"--input: '{path}' is not UTF-8 text; give a YAML file") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        if hasattr(error, "fix"):
            raise AttncliError(f"{path}: {error.problem}{where}; {error.fix}") from None
        raise AttncliError(f"{path}: not valid YAML{where}") from None
    if not isinstance(document, dict):
        raise AttncliError(
            f"{path}: expected a mapping with keys {', '.join(INPUT_FILE_KEYS)}"
        )
    unknown = [key for key in document if key not in INPUT_FILE_KEYS]
    if unknown:
        raise AttncliError(
            f"{path}: unknown key '{clipped(str(unknown[0]))}'; allowed keys: "
            f"{', '.join(INPUT_FILE_KEYS)}"
        )
    for required in ("query", "keys"):
        if document.get(required) is None:
            raise AttncliError(f"{path}: no '{required}'; the file must give query and keys")
    query = _yaml_matrix(document["query"], f"{path}: query")
    keys = _yaml_matrix(document["keys"], f"{path}: keys")
    values = (
        keys
        if document.get("values") is None
        else _yaml_matrix(document["values"], f"{path}: values")
    )
    valid_length = document.get("valid_length")
    if valid_length is not None and (
        isinstance(valid_length, bool) or not isinstance(valid_length, int)
    ):
        raise AttncliError(
            f"{path}: valid_length must be a whole number. "
            f"Received: valid_length={shown(valid_length)}"
        )
    parameters = document.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise AttncliError(f"{path}: parameters must map weight names to matrices")
    parameters = {
        str(name): _yaml_matrix(value, f"{path}: parameters: {name}", vector=True)
        for name, value in parameters.items()
    }
    return DemoInputs(query, keys, values, valid_length, parameters)


def _yaml_matrix(value, where, vector=False):
    """A YAML list of numbers (one row; kept 1-D if `vector`) or list of lists."""
    if not isinstance(value, list):
        raise AttncliError(f"{where}: expected a list of numbers or a list of rows")
    one_row = all(not isinstance(item, list) for item in value)
    rows = [value] if one_row else value
    for row in rows:
        if not isinstance(row, list):
            raise AttncliError(f"{where}: mixes numbers and rows; give a list of rows")
        for item in row:
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                raise AttncliError(f"{where}: {shown(item)} is not a number")
            if not math.isfinite(item):
                raise AttncliError(f"{where}: {shown(item)} is not a finite number")
    matrix = _rectangular(rows, where)
    return matrix[0] if one_row and vector else matrix


def resolve_inputs(query=None, keys=None, values=None, input_file=None,
                   valid_length=None):
    """The inputs of a score walk: the seq2seq example's, overridden by the command line,
    or those of `input_file`. Values default to the keys.
    """
    if input_file is not None:
        given = [name for name, text in
                 (("--query", query), ("--keys", keys), ("--values", values))
                 if text is not None]
        if given:
            raise AttncliError(
                f"--input and {given[0]} both give inputs; put everything in the file "
                f"or everything on the command line"
            )
        inputs = load_input_file(input_file)
        if valid_length is None:
            valid_length = inputs.valid_length
    else:
        base = SEQ2SEQ.inputs
        parsed_keys = base.keys if keys is None else parse_matrix(keys, "--keys")
        parsed_values = (
            parse_matrix(values, "--values") if values is not None
            else base.values if keys is None
            else parsed_keys
        )
        inputs = DemoInputs(
            query=base.query if query is None else parse_matrix(query, "--query"),
            keys=parsed_keys,
            values=parsed_values,
        )
    num_keys = inputs.keys.shape[0]
    if inputs.values.shape[0] != num_keys:
        raise AttncliError(
            f"{inputs.values.shape[0]} values for {num_keys} keys; give one value row "
            f"per key (or no values: they default to the keys)"
        )
    if valid_length is not None and not 1 <= valid_length <= num_keys:
        raise AttncliError(
            f"valid length {valid_length} is out of range; with {num_keys} keys it must be "
            f"between 1 and {num_keys}"
        )
    return DemoInputs(
        inputs.query, inputs.keys, inputs.values, valid_length, inputs.parameters
    )


def score_and_alignment(name):
    """The score function and alignment that the demo's score `name` stands for:
    `("dot", "local-m")` for `local-m`, `(name, "global")` for a score function."""
    return ("dot", name) if name in ALIGNMENTS else (name, "global")


def _takes_units(name):
    score, alignment = score_and_alignment(name)
    return SCORES[score].takes_units or ALIGNMENTS[alignment].takes_units


def _takes_window(name):
    return ALIGNMENTS[score_and_alignment(name)[1]].local


def _same_size(name):
    return SCORES[score_and_alignment(name)[0]].same_size


def _either(names):
    return f"{', '.join(names[:-1])} or {names[-1]}"


def check_sizes(score, inputs):
    """Fail if `score` cannot combine queries and keys of these sizes."""
    query_size, key_size = inputs.query.shape[1], inputs.keys.shape[1]
    if _same_size(score) and query_size != key_size:
        others = [name for name in SCORES if not _same_size(name)]
        raise AttncliError(
            f"the {score} score needs queries and keys of the same size; use --score "
            f"{_either(others)} for different sizes. Received: query size {query_size} "
            f"and key size {key_size}"
        )


def check_magnitudes(inputs):
    """Fail if the scores could overflow float32, the layers' dtype (inf, then NaN).

    A score sums products of a query's and a key's components, through a weight
    matrix for some scores: bounded by `d_q * d_k * max|q| * max|k|` times the largest
    given weight (the seeded ones are below 1). The context is at most `max|v|` per
    component.
    """
    largest = float(np.finfo(np.float32).max)
    bound = (inputs.query.shape[1] * inputs.keys.shape[1]
             * float(np.abs(inputs.query).max(initial=0.0))
             * float(np.abs(inputs.keys).max(initial=0.0)))
    for weights in inputs.parameters.values():
        bound *= max(1.0, float(np.abs(weights).max(initial=0.0)) * max(np.shape(weights)))
    if not bound <= largest:
        raise AttncliError(
            f"the inputs are too large for float32: their products reach about {bound:.3g}, "
            f"above the largest float32 ({largest:.3g}); scale the query, keys and weights down"
        )


def request_from_options(example="seq2seq", score=None, query=None, keys=None, values=None,
                         input_file=None, valid_length=None, seed=None, units=None,
                         window=None, decimals=4, output_format="table"):
    """Check the options of `score-demo` and read its inputs. `None` means not given."""
    check_choice("format", output_format, FORMATS)
    check_decimals(decimals)
    check_choice("example", example, EXAMPLES)
    if example == "self-attention":
        given = [name for name, value in (
            ("--score", score), ("--query", query), ("--keys", keys), ("--values", values),
            ("--input", input_file), ("--valid-length", valid_length), ("--seed", seed),
            ("--units", units), ("--window", window),
        ) if value is not None]
        if given:
            raise AttncliError(
                f"--example self-attention walks the inputs and weights of "
                f"{ILLUSTRATED_SELF_ATTENTION} and "
                f"takes no {given[0]}; drop it, or use the seq2seq example"
            )
        return DemoRequest(example, "dot", None, decimals=decimals,
                           output_format=output_format)
    score = check_choice("score", score or "dot", DEMO_SCORES)
    for name, value, applies in (("--units", units, _takes_units),
                                 ("--window", window, _takes_window)):
        if value is not None and not applies(score):
            scores = [other for other in DEMO_SCORES if applies(other)]
            raise AttncliError(f"{name} applies to --score {_either(scores)}, not {score}")
        if value is not None and value < 1:
            raise AttncliError(f"{name} must be at least 1. Received: {name}={value}")
    if units is not None and units > MAX_UNITS:
        raise AttncliError(
            f"--units must be at most {MAX_UNITS} (a demo's matrices are printed). "
            f"Received: --units={clipped(str(units))}"
        )
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise AttncliError(
            f"--seed must be between 0 and 2**32 - 1. Received: --seed={clipped(str(seed))}"
        )
    inputs = resolve_inputs(query, keys, values, input_file, valid_length)
    check_sizes(score, inputs)
    check_magnitudes(inputs)
    return DemoRequest(example, score, inputs, seed=0 if seed is None else seed,
                       units=units, window=window, decimals=decimals,
                       output_format=output_format)
