"""Bad input to the commands: one line on stderr, exit code 2, before any work starts.

Each case was a traceback (or a silent acceptance) once: lists nested hundreds deep,
arguments that are not UTF-8, numbers out of any range, NaN and infinities, patterns
RE2 cannot compile, values echoed whole. Real subprocesses of `python -m attncli`; none
of them trains, and none leaves a run directory behind.
"""

import pytest
from attncli_runs import TINY, attncli, train_before_tensorflow
from cli_errors import one_line_error

DEEP = "[" * 500 + "]" * 500  # 1 KB of YAML, 500 levels


def refused_before_work(tmp_path, *overrides, config=TINY):
    """`attncli train CONFIG --set ...` refused before TensorFlow and before the run is made:
    its error line."""
    args = [config, "--run-dir", "run"]
    for override in overrides:
        args += ["--set", override]
    completed = train_before_tensorflow(*args, cwd=tmp_path)
    assert "EXIT 2" in completed.stdout and "HEAVY []" in completed.stdout, completed
    assert not (tmp_path / "run").exists()
    lines = [line for line in completed.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1 and "Traceback" not in completed.stderr, completed.stderr
    return lines[0]


@pytest.mark.slow
def test_lists_nested_500_deep_are_one_line(tmp_path):
    config = tmp_path / "deep.yaml"
    config.write_text(f"training: {DEEP}\n")
    message = refused_before_work(tmp_path, config=config)
    assert "nest deeper than 32 levels" in message and str(config) in message
    message = refused_before_work(tmp_path, f"training.epochs={DEEP}")
    assert "--set 'training.epochs': lists and mappings nest deeper" in message
    demo = tmp_path / "demo.yaml"
    demo.write_text(f"query: {DEEP}\nkeys: [[1, 2]]\n")
    message = one_line_error(attncli("score-demo", "--input", demo, cwd=tmp_path))
    assert "nest deeper than 32 levels" in message


NOT_UTF8 = "caf\udce9"  # the bytes b"caf\xe9" (Latin-1) as Python keeps them in sys.argv


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ["translate", "RUN", NOT_UTF8],
    ["inspect-weights", "RUN", "--text", NOT_UTF8],
    ["export", "RUN", "out", "--sample", NOT_UTF8],
    ["train", TINY, "--run-dir", NOT_UTF8],
    ["translate", NOT_UTF8, "hola"],
])
def test_arguments_that_are_not_utf8_are_one_line(tmp_path, args):
    message = one_line_error(attncli(*args, cwd=tmp_path))
    assert "'caf\\udce9', is not valid UTF-8" in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("override, problem", [
    ("decoding.max_length_ratio=1e308", "max_length_ratio must be a number in [0, 1000]"),
    ("decoding.max_length_offset=10000000", "max_length_offset must be in [1, 100000]"),
    ("training.epochs=" + "9" * 400, "training.epochs must be an integer between -2**63 and"),
    ("training.clip_norm=" + "9" * 400, "training.clip_norm must be a finite number"),
    ("training.clip_norm=.nan", "training.clip_norm must be a finite number. Received: "
                                "training.clip_norm=nan"),
    ("training.max_minutes=.nan", "training.max_minutes must be a finite number"),
    ("training.learning_rate=.inf", "training.learning_rate must be a finite number"),
    ("model.dropout=-.inf", "model.dropout must be a finite number"),
    ("decoding.alpha=.nan", "decoding.alpha must be a finite number"),
])
def test_settings_out_of_every_range_are_refused_before_work(tmp_path, override, problem):
    message = refused_before_work(tmp_path, override)
    assert problem in message
    assert len(message) < 300


@pytest.mark.slow
@pytest.mark.parametrize("args, problem", [
    (["--seed", "-1"], "--seed must be between 0 and 2**32 - 1. Received: --seed=-1"),
    (["--seed", str(2**32)], "--seed must be between 0 and 2**32 - 1"),
    (["--score", "concat", "--units", "1000000000"], "--units must be at most 4096"),
    (["--query", "3e38,3e38", "--keys", "3e38,3e38;1,1"], "the inputs are too large for float32"),
    (["--score", "general", "--query", "1e19,1e19", "--keys", "1e19,1e19"],
     "the inputs are too large for float32"),
    (["--format", "x" * 5000], "unknown format 'xxxx"),
])
def test_score_demo_inputs_out_of_range_are_one_line(tmp_path, args, problem):
    message = one_line_error(attncli("score-demo", *args, cwd=tmp_path))
    assert problem in message
    assert len(message) < 300


@pytest.mark.slow
def test_score_demo_refuses_weights_whose_products_overflow(tmp_path):
    demo = tmp_path / "demo.yaml"
    demo.write_text("query: [1.0e+18, 1]\nkeys: [[1.0e+18, 1]]\n"
                    "parameters: {W_a: [[1.0e+10, 0], [0, 1]]}\n")
    message = one_line_error(attncli("score-demo", "--score", "general", "--input", demo,
                                     cwd=tmp_path))
    assert "the inputs are too large for float32" in message


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ["translate", "RUN", "hola", "--format", "x" * 5000],
    ["inspect-weights", "RUN", "--text", "hola", "--attention", "x" * 5000],
])
def test_a_long_bad_choice_is_echoed_cut(tmp_path, args):
    # Both are checked before the run is opened: RUN need not exist.
    message = one_line_error(attncli(*args, cwd=tmp_path))
    assert "x" * 30 in message and len(message) < 200


@pytest.mark.slow
def test_a_drop_pattern_re2_cannot_compile_is_refused_before_the_run_is_made(tmp_path):
    # Quoted, so that YAML reads the string `[` (unquoted it is a YAML error).
    result = attncli("train", TINY, "--run-dir", "run", "--set", 'data.source.drop_pattern="["',
                     cwd=tmp_path)
    message = one_line_error(result)
    assert "re2.cc" not in result.stderr  # RE2's own log line is not shown
    assert "data.source.drop_pattern is not an RE2 pattern ('missing ]: [')" in message
    assert "Received: data.source.drop_pattern='['" in message
    assert not (tmp_path / "run").exists()
