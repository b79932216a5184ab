"""The `attncli` app and `score-demo`, in process (CliRunner) and as the installed script."""

import importlib.metadata
import json
import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from process_watch import run
from typer.testing import CliRunner

import attncli
from attncli.cli.app import app
from attncli.errors import AttncliError

runner = CliRunner()

SEQ2SEQ_QUERY = np.array([[10.0, 5, 10]])
SEQ2SEQ_KEYS = np.array([[0.0, 1, 1], [5, 0, 1], [1, 1, 0], [0, 5, 1]])


def invoke(*args):
    # A fixed width: the tables must not depend on the terminal the tests run in.
    return runner.invoke(app, list(args), prog_name="attncli", env={"COLUMNS": "160"})


def demo_json(*args):
    result = invoke("score-demo", "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def reference_attention(query, keys, values, scale=1.0, valid_length=None):
    """NumPy: scores = q k^T * scale, softmax over the valid keys, context = weights v."""
    scores = query @ keys.T * scale
    valid = np.arange(keys.shape[0]) < (valid_length or keys.shape[0])
    shifted = np.where(valid, scores - scores[:, valid].max(axis=-1, keepdims=True), -np.inf)
    weights = np.exp(shifted)
    weights /= weights.sum(axis=-1, keepdims=True)
    return scores, weights, weights @ values


def assert_user_error(result, fragment):
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert fragment in lines[0]
    assert "Traceback" not in result.output


# --- the application -------------------------------------------------------------


@pytest.mark.parametrize("args", [["--help"], ["score-demo", "--help"], ["export", "--help"],
                                  ["serve", "--help"], ["--version"]])
def test_help_does_not_import_tensorflow(args):
    # `python -m attncli ARGS` in a fresh interpreter, which then reports what it imported.
    code = textwrap.dedent(f"""
        import runpy, sys
        sys.argv = ["attncli"] + {args!r}
        try:
            runpy.run_module("attncli", run_name="__main__")
        except SystemExit as exit:
            assert exit.code == 0, exit.code
        heavy = sorted(name for name in ("tensorflow", "keras", "fastapi", "uvicorn",
                                         "starlette") if name in sys.modules)
        print("HEAVY", heavy)
    """)
    completed = run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2])
    assert completed.returncode == 0, completed.stderr
    assert "HEAVY []" in completed.stdout
    shown = {"--help": "score-demo", "--version": f"attncli {attncli.__version__}"}
    assert shown.get(args[0], args[0]) in completed.stdout


def test_help_lists_the_four_commands():
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("train", "translate", "inspect-weights", "score-demo", "export"):
        assert command in result.stdout


def test_version_is_the_package_version():
    result = invoke("--version")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"attncli {attncli.__version__}\n"
    assert attncli.__version__ == importlib.metadata.version("attncli")


def test_attncli_alone_prints_the_help():
    result = invoke()
    assert result.exit_code == 0
    assert "score-demo" in result.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--bogus"], "No such option: --bogus (see 'attncli --help')"),
        (["translate-everything"], "No such command 'translate-everything'"),
        (["score-demo", "--bogus"], "No such option: --bogus (see 'attncli score-demo --help')"),
        (["score-demo", "--decimals", "x"], "Invalid value for '--decimals'"),
        (["score-demo", "--valid-length", "two"], "Invalid value for '--valid-length'"),
        (["score-demo", "--query"], "Option '--query' requires an argument"),
        # A word too many: what the user most likely meant.
        (["inspect-weights", "RUN", "Tengo", "hambre"],
         '(Tengo hambre); give the text with --text "..." (see '),
        (["train", "configs/tiny-test.yaml", "pairs.tsv"],
         "(pairs.tsv); name the data in the config (data.train) or with --data-dir (see "),
        (["serve", "RUN", "OTHER"], "(OTHER); serve more runs with --model NAME=RUN, or "),
    ],
)
def test_command_line_parsing_errors_are_one_line_and_exit_2(args, fragment):
    assert_user_error(invoke(*args), fragment)


def test_debug_shows_the_error_itself():
    result = invoke("--debug", "score-demo", "--keys", "1,2;3")
    assert result.exit_code != 0
    assert isinstance(result.exception, AttncliError)
    assert "row 2 has 1 number but row 1 has 2" in str(result.exception)


# --- the seq2seq example ---------------------------------------------------------


def test_default_walks_the_seq2seq_example():
    result = invoke("score-demo")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "decoder hidden [10, 5, 10]" in out
    for key, score in (("[0, 1, 1]", "15"), ("[5, 0, 1]", "60"), ("[1, 1, 0]", "15"),
                       ("[0, 5, 1]", "35")):
        assert any(key in line and f" {score} " in line for line in out.splitlines())
    for header in ("encoder hidden", "1. score", "2. softmax", "3. alignment", "4. sum"):
        assert header in out
    assert "context [5.0000, 0.0000, 1.0000]" in out
    assert ('Raimi Karim\'s "Attn: Illustrated Attention" (2019) rounds '
            "softmax([15, 60, 15, 35]) to [0, 1, 0, 0]") in out
    assert "design note" not in out


def test_json_figures_equal_the_layer_and_numpy():
    from layers import DotProductAttention

    document = demo_json()
    layer = DotProductAttention(use_scale=False)
    query = SEQ2SEQ_QUERY[None].astype("float32")
    keys = SEQ2SEQ_KEYS[None].astype("float32")
    context, weights = layer([query, keys], return_attention_scores=True)
    steps = document["steps"]
    np.testing.assert_array_equal(steps["weights"], np.asarray(weights)[0])
    np.testing.assert_array_equal(steps["context"], np.asarray(context)[0])

    scores, reference_weights, reference_context = reference_attention(
        SEQ2SEQ_QUERY, SEQ2SEQ_KEYS, SEQ2SEQ_KEYS
    )
    np.testing.assert_allclose(steps["scores"], scores)
    np.testing.assert_allclose(steps["weights"], reference_weights, rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(steps["context"], reference_context, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        np.sum(steps["weighted_values"], axis=1), steps["context"], rtol=1e-6
    )
    assert document["inputs"]["keys"] == SEQ2SEQ_KEYS.tolist()
    assert document["parameters"] == {}


def markdown_rows(text, first_cell):
    """Cells of the Markdown table rows whose first cell is `first_cell`."""
    rows = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            rows.append(cells)
    return rows


def test_printed_figures_equal_the_layer_output():
    from layers import DotProductAttention

    query = np.array([[[1.0, 2, 0]]], dtype="float32")
    keys = np.array([[[1.0, 0, 1], [0, 1, 1], [1, 1, 0]]], dtype="float32")
    layer = DotProductAttention(use_scale=True)
    context, weights = layer([query, keys], return_attention_scores=True)
    scores = np.asarray(layer.score(query, keys))[0, 0]
    weights, context = np.asarray(weights)[0, 0], np.asarray(context)[0, 0]

    result = invoke("score-demo", "--query", "1,2,0", "--keys", "1,0,1;0,1,1;1,1,0",
                    "--score", "scaled_dot", "--format", "markdown", "--decimals", "3")
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if line.startswith("| s |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    for s in range(3):
        cells = markdown_rows(result.stdout, str(s + 1))[0]
        assert cells[columns.index("1. score")] == f"{scores[s]:.3f}"
        assert cells[columns.index("2. softmax")] == f"{weights[s]:.3f}"
        alignment = ", ".join(f"{weights[s] * k:.3f}" for k in keys[0, s])
        assert cells[columns.index("3. alignment")] == f"[{alignment}]"
    expected = ", ".join(f"{value:.3f}" for value in context)
    assert f"context [{expected}]" in result.stdout


def test_scaled_dot_divides_by_the_square_root_of_the_size():
    document = demo_json("--score", "scaled_dot")
    scores, weights, context = reference_attention(
        SEQ2SEQ_QUERY, SEQ2SEQ_KEYS, SEQ2SEQ_KEYS, scale=1 / math.sqrt(3)
    )
    np.testing.assert_allclose(document["steps"]["scores"], scores, rtol=1e-6)
    np.testing.assert_allclose(document["steps"]["weights"], weights, rtol=1e-5)
    np.testing.assert_allclose(document["steps"]["context"], context, rtol=1e-5)
    assert not any("article" in note for note in document["notes"])


def test_custom_query_keys_and_values_with_several_queries():
    document = demo_json("--query", "1,0;0,1", "--keys", "1, 0; 0, 1; 1, 1",
                         "--values", "1,2,3;4,5,6;7,8,9")
    query = np.array([[1.0, 0], [0, 1]])
    keys = np.array([[1.0, 0], [0, 1], [1, 1]])
    values = np.arange(1.0, 10).reshape(3, 3)
    _, weights, context = reference_attention(query, keys, values)
    np.testing.assert_allclose(document["steps"]["weights"], weights, rtol=1e-6)
    np.testing.assert_allclose(document["steps"]["context"], context, rtol=1e-6)
    assert document["inputs"]["values"] == values.tolist()

    result = invoke("score-demo", "--query", "1,0;0,1", "--keys", "1,0;0,1;1,1",
                    "--values", "1,2,3;4,5,6;7,8,9")
    assert result.exit_code == 0, result.output
    assert "value 3" in result.stdout
    assert "decoder hidden 2" in result.stdout


def test_keys_alone_are_also_the_values():
    document = demo_json("--keys", "1,0,0;0,0,1")
    assert document["inputs"]["values"] == [[1, 0, 0], [0, 0, 1]]
    assert document["inputs"]["query"] == [[10, 5, 10]]


def test_valid_length_masks_the_keys_after_it():
    from attncli.cli import demo_render
    from attncli.cli.demo_inputs import resolve_inputs
    from attncli.cli.score_demo import walk_score

    document = demo_json("--valid-length", "1")
    weights = np.array(document["steps"]["weights"])[0]
    assert weights.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert document["inputs"]["valid_length"] == 1
    assert document["steps"]["context"] == [[0.0, 1.0, 1.0]]

    result = invoke("score-demo", "--valid-length", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("(masked)") == 2
    assert "rounds softmax" not in result.stdout

    walk = walk_score("dot", resolve_inputs(valid_length=2))
    step = demo_render.sections(walk, 4)[-1]
    assert step.dimmed == {2, 3}
    assert [row[3] for row in step.rows[2:4]] == ["0", "0"]


def test_decimals_sets_the_digits():
    result = invoke("score-demo", "--decimals", "2", "--query", "1,0,0")
    assert result.exit_code == 0, result.output
    _, weights, context = reference_attention(
        np.array([[1.0, 0, 0]]), SEQ2SEQ_KEYS, SEQ2SEQ_KEYS
    )
    expected = ", ".join(f"{value:.2f}" for value in context[0])
    assert f"context [{expected}]" in result.stdout
    assert f" {weights[0, 0]:.2f} " in result.stdout


def test_markdown_has_a_table_per_step():
    result = invoke("score-demo", "--format", "markdown")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("### Attention with the dot score")
    assert "| s | encoder hidden | 1. score | 2. softmax | 3. alignment |" in out
    assert "| 2 | [5, 0, 1] | 60 | 1.0000 | [5.0000, 0.0000, 1.0000] |" in out
    assert '> Note: Raimi Karim\'s "Attn: Illustrated Attention" (2019) rounds' in out


def test_input_file(tmp_path):
    path = tmp_path / "inputs.yaml"
    path.write_text(textwrap.dedent("""\
        query: [1, 2]
        keys:
          - [1, 0]
          - [0, 1]
          - [1, 1]
        values: [[1, 0], [0, 1], [5, 5]]
        valid_length: 2
    """))
    document = demo_json("--input", str(path))
    _, weights, context = reference_attention(
        np.array([[1.0, 2]]), np.array([[1.0, 0], [0, 1], [1, 1]]),
        np.array([[1.0, 0], [0, 1], [5, 5]]), valid_length=2,
    )
    np.testing.assert_allclose(document["steps"]["weights"], weights, rtol=1e-6)
    np.testing.assert_allclose(document["steps"]["context"], context, rtol=1e-6)
    assert document["inputs"]["valid_length"] == 2


def test_valid_length_option_overrides_the_file(tmp_path):
    path = tmp_path / "inputs.yaml"
    path.write_text("query: [1, 0]\nkeys: [[1, 0], [0, 1]]\nvalid_length: 2\n")
    document = demo_json("--input", str(path), "--valid-length", "1")
    assert document["steps"]["weights"] == [[1.0, 0.0]]


# --- user errors -----------------------------------------------------------------


def write(tmp_path, text):
    path = tmp_path / "inputs.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--keys", "0,1,1;5,0"], "row 2 has 2 numbers but row 1 has 3"),
        (["--query", "1,2"], "needs queries and keys of the same size"),
        (["--score", "scaled_dot", "--keys", "1,2;3,4"], "query size 3 and key size 2"),
        (["--query", "1,x,3"], "--query: 'x' is not a number"),
        (["--keys", "1,nan,3"], "not a finite number"),
        (["--keys", "1,1e39,3"], "too large for float32"),
        (["--keys", ""], "--keys is empty"),
        (["--keys", "   "], "--keys is empty"),
        (["--valid-length", "0"], "valid length 0 is out of range"),
        (["--valid-length", "5"], "between 1 and 4"),
        (["--example", "transformer"],
         "unknown example 'transformer'; choose one of: seq2seq, self-attention"),
        (["--score", "cosine"], "choose one of: dot, scaled_dot, general, concat, additive, "
                                "local-m, local-p"),
        (["--format", "html"], "choose one of: table, markdown, json"),
        (["--decimals", "-1"], "--decimals -1 is out of range"),
        (["--values", "1,2"], "1 values for 4 keys"),
        (["--units", "4"], "--units applies to --score concat, additive or local-p, not dot"),
        (["--window", "2"], "--window applies to --score local-m or local-p"),
        (["--example", "self-attention", "--score", "dot"], "takes no --score"),
        (["--example", "self-attention", "--query", "1,2"], "takes no --query"),
        (["--input", "/nonexistent/inputs.yaml"], "--input: no file"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(args, fragment):
    assert_user_error(invoke("score-demo", *args), fragment)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("query: [1, 2]\nkeys: [[1, 2], [3]]\n", "keys: row 2 has 1 number but row 1 has 2"),
        ("query: [1, 2]\n", "no 'keys'"),
        ("query: [1, 2]\nkeys: []\n", "keys holds no numbers"),
        ("query: [1, 2]\nkeys: [[1, two]]\n", "'two' is not a number"),
        ("query: [1, 2]\nkeys: [[1, 2]]\nwindow: 3\n", "unknown key 'window'"),
        ("query: [1, 2]\nkeys: [[1, 2]]\nvalid_length: 2\n", "valid length 2 is out of range"),
        ("query: [1, 2]\nkeys: [[1, 2]]\nvalid_length: 1.5\n", "must be a whole number"),
        ("query: [1, 2]\nkeys: [[1, 2]]\nparameters: {W_a: [[1]]}\n",
         "the dot score has no weight 'W_a'"),
        ("query: [1, 2\n", "not valid YAML"),
        ("query: [1, .inf]\nkeys: [[1, 2]]\n", "query: inf is not a finite number"),
        ("- 1\n- 2\n", "expected a mapping"),
    ],
)
def test_input_file_errors(tmp_path, text, fragment):
    assert_user_error(invoke("score-demo", "--input", write(tmp_path, text)), fragment)


def test_input_file_that_is_not_text(tmp_path):
    path = tmp_path / "inputs.yaml"
    path.write_bytes(b"\xff\xfe\x00query")
    assert_user_error(invoke("score-demo", "--input", str(path)), "is not UTF-8 text")


def test_input_file_and_command_line_inputs_conflict(tmp_path):
    path = write(tmp_path, "query: [1, 2]\nkeys: [[1, 2]]\n")
    assert_user_error(
        invoke("score-demo", "--input", path, "--keys", "1,2"), "--input and --keys"
    )


# --- the installed script --------------------------------------------------------


def installed_attncli():
    script = Path(sys.executable).parent / "attncli"
    assert script.exists(), f"{script} is missing: install the package (pip install -e .)"
    return script


@pytest.mark.slow
def test_installed_script_prints_the_worked_example():
    completed = run([str(installed_attncli()), "score-demo", "--format", "json"])
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["steps"]["scores"] == [[15.0, 60.0, 15.0, 35.0]]


def test_installed_script_reports_a_user_error_on_one_line():
    completed = run([str(installed_attncli()), "score-demo", "--score", "cosine"])
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.strip().startswith("Error: unknown score 'cosine'")
    assert "Traceback" not in completed.stderr


# --- the other score functions -----------------------------------------------------


def softmax(scores, allowed=None):
    allowed = np.ones_like(scores, dtype=bool) if allowed is None else allowed
    shifted = np.where(allowed, scores - np.where(allowed, scores, -np.inf).max(-1, keepdims=True),
                       -np.inf)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=-1, keepdims=True)


def check_walk(document, scores, weights):
    """The document's scores and weights against a NumPy reference; its context
    against weights @ values."""
    steps = document["steps"]
    values = np.array(document["inputs"]["values"])
    np.testing.assert_allclose(steps["scores"], scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(steps["weights"], weights, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(steps["context"], weights @ values, rtol=1e-5, atol=1e-6)


def test_general_score_uses_W_a():
    document = demo_json("--score", "general")
    W_a = np.array(document["parameters"]["W_a"])
    assert W_a.shape == (3, 3)
    scores = SEQ2SEQ_QUERY @ (SEQ2SEQ_KEYS @ W_a).T
    np.testing.assert_allclose(document["steps"]["projected_keys"], SEQ2SEQ_KEYS @ W_a,
                               rtol=1e-5, atol=1e-6)
    check_walk(document, scores, softmax(scores))


def test_general_score_combines_different_sizes_and_equals_the_layer():
    from layers import LuongAttention

    document = demo_json("--score", "general", "--query", "1,2", "--keys", "1,0,1;0,1,0")
    layer = LuongAttention(score="general")
    query = np.array([[[1.0, 2]]], dtype="float32")
    keys = np.array([[[1.0, 0, 1], [0, 1, 0]]], dtype="float32")
    layer([query, keys])
    layer.W_a.assign(np.array(document["parameters"]["W_a"], dtype="float32"))
    context, weights = layer([query, keys], return_attention_scores=True)
    np.testing.assert_array_equal(document["steps"]["weights"], np.asarray(weights)[0])
    np.testing.assert_array_equal(document["steps"]["context"], np.asarray(context)[0])


def test_concat_score():
    document = demo_json("--score", "concat", "--units", "4")
    W_a = np.array(document["parameters"]["W_a"])
    v_a = np.array(document["parameters"]["v_a"])
    assert W_a.shape == (6, 4) and v_a.shape == (4,)
    hidden = np.tanh((SEQ2SEQ_QUERY @ W_a[:3])[:, None, :] + (SEQ2SEQ_KEYS @ W_a[3:])[None])
    scores = hidden @ v_a
    check_walk(document, scores, softmax(scores))


def test_additive_score():
    document = demo_json("--score", "additive", "--units", "5", "--seed", "3")
    p = {name: np.array(value) for name, value in document["parameters"].items()}
    assert p["W_q"].shape == (3, 5) and p["W_k"].shape == (3, 5) and p["v"].shape == (5,)
    hidden = np.tanh((SEQ2SEQ_QUERY @ p["W_q"])[:, None, :] + (SEQ2SEQ_KEYS @ p["W_k"])[None])
    scores = hidden @ p["v"]
    check_walk(document, scores, softmax(scores))
    result = invoke("score-demo", "--score", "additive")
    assert result.exit_code == 0, result.output
    assert "k W_k" in result.stdout and "Learned parameters" in result.stdout


def test_seed_sets_the_learned_matrices():
    first = demo_json("--score", "general", "--seed", "1")["parameters"]["W_a"]
    again = demo_json("--score", "general", "--seed", "1")["parameters"]["W_a"]
    other = demo_json("--score", "general", "--seed", "2")["parameters"]["W_a"]
    assert first == again
    assert first != other


def test_local_m_attends_within_the_window_around_t():
    document = demo_json("--score", "local-m", "--query", "1,0,0;0,0,1;0,1,0",
                         "--window", "1")
    query = np.array([[1.0, 0, 0], [0, 0, 1], [0, 1, 0]])
    positions = np.arange(4)
    allowed = np.abs(positions[None, :] - np.arange(3)[:, None]) <= 1
    scores = query @ SEQ2SEQ_KEYS.T
    check_walk(document, scores, softmax(scores, allowed))
    assert document["steps"]["allowed"] == allowed.tolist()
    assert document["steps"]["window_centres"] == [0.0, 1.0, 2.0]

    result = invoke("score-demo", "--score", "local-m")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("(outside window)") == 2
    assert "p_t = 0, D = 1" in result.stdout


def test_local_p_predicts_the_centre_and_multiplies_by_a_gaussian():
    document = demo_json("--score", "local-p", "--window", "2", "--valid-length", "3")
    W_p = np.array(document["parameters"]["W_p"])
    v_p = np.array(document["parameters"]["v_p"])
    centre = 3 / (1 + np.exp(-(np.tanh(SEQ2SEQ_QUERY @ W_p) @ v_p)))  # S sigmoid, S = 3 valid keys
    positions = np.arange(4)
    offsets = positions[None, :] - centre[:, None]
    allowed = (np.abs(offsets) <= 2) & (positions < 3)
    gaussian = np.exp(-offsets**2 / (2 * 1.0**2))
    scores = SEQ2SEQ_QUERY @ SEQ2SEQ_KEYS.T
    weights = softmax(scores, allowed) * gaussian
    np.testing.assert_allclose(document["steps"]["window_centres"], centre, rtol=1e-5)
    np.testing.assert_allclose(np.array(document["steps"]["gaussian"])[allowed],
                               gaussian[allowed], rtol=1e-5)
    check_walk(document, scores, weights)
    result = invoke("score-demo", "--score", "local-p", "--format", "markdown")
    assert "| 2. softmax | gaussian | weight | 3. alignment |" in result.stdout


def test_input_file_parameters_are_used(tmp_path):
    path = write(tmp_path, textwrap.dedent("""\
        query: [1, 2]
        keys: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
        parameters:
          W_a: [[1, 0], [0, 1], [1, 1]]
    """))
    document = demo_json("--input", path, "--score", "general")
    W_a = np.array([[1.0, 0], [0, 1], [1, 1]])
    assert document["parameters"]["W_a"] == W_a.tolist()
    scores = np.array([[1.0, 2]]) @ (np.eye(3) @ W_a).T
    assert document["steps"]["scores"] == scores.tolist()
    check_walk(document, scores, softmax(scores))


def test_input_file_parameter_of_the_wrong_shape(tmp_path):
    path = write(tmp_path, "query: [1, 2]\nkeys: [[1, 2]]\nparameters: {W_a: [[1, 2, 3]]}\n")
    assert_user_error(
        invoke("score-demo", "--input", path, "--score", "general"),
        "W_a has shape (1, 3) but the general score needs (2, 2)",
    )


# --- the self-attention example ----------------------------------------------------

ARTICLE_INPUTS = np.array([[1.0, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]])
ARTICLE_W_K = np.array([[0.0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]])
ARTICLE_W_Q = np.array([[1.0, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]])
ARTICLE_W_V = np.array([[0.0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]])


def test_self_attention_example_every_input():
    document = demo_json("--example", "self-attention")
    steps = document["steps"]
    queries, keys, values = (ARTICLE_INPUTS @ w for w in (ARTICLE_W_Q, ARTICLE_W_K, ARTICLE_W_V))
    assert steps["keys"] == [[0, 1, 1], [4, 4, 0], [2, 3, 1]] == keys.tolist()
    assert steps["queries"] == [[1, 0, 2], [2, 2, 2], [2, 1, 3]] == queries.tolist()
    assert steps["values"] == [[1, 2, 3], [2, 8, 0], [2, 6, 3]] == values.tolist()
    scores = queries @ keys.T
    assert steps["scores"][0] == [2, 4, 4]
    weights = softmax(scores)
    np.testing.assert_allclose(steps["weights"], weights, rtol=1e-5)
    np.testing.assert_allclose(steps["context"], weights @ values, rtol=1e-5)
    np.testing.assert_allclose(steps["context"][0], [1.9366, 6.6831, 1.5951], atol=1e-4)
    assert document["parameters"]["W_k"] == ARTICLE_W_K.tolist()
    assert document["inputs"]["inputs"] == ARTICLE_INPUTS.tolist()


def test_self_attention_tables_and_rounding_note():
    result = invoke("score-demo", "--example", "self-attention")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for fragment in ("1. Inputs", "2. Weights", "3. Keys, queries and values",
                     "Input 1, query [1, 0, 2]", "Input 2, query [2, 2, 2]",
                     "Input 3, query [2, 1, 3]", "4. score", "5. softmax",
                     "6. weighted value", "7. sum", "8. Outputs",
                     "output [1.9366, 6.6831, 1.5951]"):
        assert fragment in out
    note = " ".join(out.split('Note: Raimi Karim\'s "Illustrated: Self-Attention" (2019) '
                             "rounds")[1].split())
    assert note.startswith(
        "softmax([2, 4, 4]) to [0.0, 0.5, 0.5]; exactly it is [0.0634, 0.4683, 0.4683], "
        "so output 1 is [1.9366, 6.6831, 1.5951], not [2.0, 7.0, 1.5]."
    )


def test_self_attention_markdown():
    result = invoke("score-demo", "--example", "self-attention", "--format", "markdown",
                    "--decimals", "2")
    assert result.exit_code == 0, result.output
    assert "| Input 1 | [0, 1, 1] | [1, 0, 2] | [1, 2, 3] |" in result.stdout
    assert "| 1 | [0, 1, 1] | [1, 2, 3] | 2 | 0.06 | [0.06, 0.13, 0.19] |" in result.stdout


def test_a_single_key_takes_all_the_weight(recwarn):
    document = demo_json("--keys", "1,2,3")
    assert document["steps"]["weights"] == [[1.0]]
    assert document["steps"]["context"] == [[1.0, 2.0, 3.0]]
    assert not [w for w in recwarn if "softmax" in str(w.message)]
