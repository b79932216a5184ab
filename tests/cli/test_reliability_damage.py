"""A damaged or missing file of a run is named with what is wrong; leftovers are cleared.

Real damaged files in copies of one tiny trained run, through the command in the test's
process: what the command reads is the point, not its process (its one-line error is
checked as a subprocess's; train and translate run as processes in test_workflow). A
deleted model configuration or vocabulary, a saved configuration that no longer
validates, a corpus of no usable pair, a truncated vocabulary, a tokenizer file with a
bad setting, a finished run resumed, the export that clears what a killed one left (its
check's process takes the long samples). A killed export is a `python -m attncli`
subprocess.
"""

import fcntl
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from attncli_runs import (  # noqa: F401  (run and trained are fixtures)
    run, start, trained, wait_for,
)
from cli_errors import one_line_error
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.files import clear_abandoned

FIXTURE_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "run-0.1.0"


def command_error(*args):
    """The one-line error of `attncli ARGS` in this process, as wide as a subprocess's
    (no line of Rich's wrapped)."""
    return one_line_error(CliRunner().invoke(app, [str(arg) for arg in args],
                                             env={"COLUMNS": "500"}))


def translate_error(run):
    """The one-line error of `attncli translate RUN hola` (loading a model's files is
    the point)."""
    return command_error("translate", run, "hola")


@pytest.mark.slow
def test_a_truncated_vocabulary_is_named(run):
    vocabulary = run / "model" / "source.vocab.txt"
    lines = vocabulary.read_text().splitlines(keepends=True)
    vocabulary.write_text("".join(lines[: len(lines) // 2]))
    message = translate_error(run)
    assert str(vocabulary) in message
    # A token cut in two and its first half already there: the file is named too.
    vocabulary.write_text("".join(lines[:8] + [lines[6]]))
    message = translate_error(run)
    assert f"{vocabulary} is damaged (vocabulary token '{lines[6].strip()}' appears twice)" \
        in message


@pytest.mark.slow
@pytest.mark.parametrize("setting, problem", [
    ({"level": "words"}, "tokenizer level must be one of char, word, subword, "
                         "sentencepiece, pretokenized. Received: level='words'"),
    ({"drop_pattern": "["}, "drop_pattern is not an RE2 pattern ("),
    ({"drop_pattern": 3}, "drop_pattern must be a string. Received: drop_pattern=3"),
    ({"lowercase": "yes"}, "lowercase must be true or false"),
])
def test_a_tokenizer_file_with_a_bad_setting_is_named_at_load(run, setting, problem):
    path = run / "model" / "target.tokenizer.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **setting}))
    message = translate_error(run)
    assert f"{path} is damaged ({problem}" in message


@pytest.mark.slow
def test_a_deleted_model_configuration_is_named_as_missing(run):
    (run / "model" / "config.json").unlink()
    message = translate_error(run)
    assert f"{run / 'model' / 'config.json'} is missing" in message
    assert "train longer" not in message


@pytest.mark.slow
def test_a_deleted_model_directory_is_named_as_missing(run):
    shutil.rmtree(run / "model")
    message = translate_error(run)
    assert f"{run / 'model'} is missing: the run kept a best model (epoch 1, metrics.jsonl)" \
        in message
    assert "train longer" not in message


@pytest.mark.slow
def test_a_bad_value_in_the_saved_configuration_is_named_on_resume(run):
    config = run / "config.yaml"
    config.write_text(re.sub(r"clip_norm: .*", "clip_norm: .nan", config.read_text()))
    message = command_error("train", "--resume", "--run-dir", run)
    assert f"{config}, the configuration the run saved, is damaged: training.clip_norm must " \
        "be a finite number" in message


@pytest.mark.slow
def test_a_deleted_vocabulary_is_named_on_resume_and_never_learned_again(run):
    (run / "target.vocab.txt").unlink()
    message = command_error("train", "--resume", "--run-dir", run, "--set", "training.epochs=2")
    assert f"{run / 'target.vocab.txt'} is missing; the run cannot go on" in message
    assert "put them back (its model keeps a copy in model/), or start again" in message
    assert not (run / "target.vocab.txt").exists()
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1
    # Without the model's copy, the message points to none.
    (run / "model" / "target.vocab.txt").unlink()
    message = one_line_error(CliRunner().invoke(app, ["train", "--resume", "--run-dir", str(run)]))
    assert "put them back, or start again with --overwrite" in message
    assert "copy" not in message


@pytest.mark.slow
def test_a_run_stopped_before_its_target_vocabulary_is_written_says_so_on_resume(tmp_path):
    # What a run killed while it learned its vocabularies leaves: its configuration and
    # the source side's vocabulary, no target side's, no checkpoint and no model.
    run = tmp_path / "run"
    run.mkdir()
    for name in ("run.json", "config.yaml", "source.vocab.txt", "source.tokenizer.json"):
        shutil.copy(FIXTURE_RUN / name, run / name)
    message = one_line_error(CliRunner().invoke(app, ["train", "--resume", "--run-dir", str(run)]))
    assert message == (
        f"Error: {run} stopped while its vocabularies were written, before training "
        "(target.tokenizer.json is missing): there is nothing to resume; start it again "
        "with --overwrite"
    )
    # Nothing learned or written (its lock aside).
    assert sorted(path.name for path in run.iterdir() if path.name != ".writer.lock") == [
        "config.yaml", "run.json", "source.tokenizer.json", "source.vocab.txt",
    ]


@pytest.mark.slow
def test_resuming_a_finished_run_says_there_is_nothing_to_train(run):
    result = CliRunner().invoke(app, ["train", "--resume", "--run-dir", str(run)],
                                env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output
    assert "the run is finished (1 of 1 epochs trained), nothing to train" in result.stderr
    assert "epoch 2, batch 0" not in result.stderr
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1


@pytest.mark.slow
def test_resuming_a_run_whose_time_budget_is_spent_says_how_to_extend_it(run):
    # Its one epoch took more than 0.06 seconds: a budget of 0.001 minutes is spent.
    result = CliRunner().invoke(app, ["train", "--resume", "--run-dir", str(run), "--set",
                                      "training.epochs=2", "--set", "training.max_minutes=0.001"],
                                env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output
    assert ("the time budget of 0.001 minutes is spent (a total across resumes), nothing to "
            "train (give more with --set training.max_minutes=M, M above 0.001)") in result.stderr
    assert "finished: the time budget of 0.001 minutes is spent" in result.stderr
    assert "epoch 2, batch 0" not in result.stderr
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1


@pytest.mark.slow
def test_an_export_clears_what_a_killed_export_left_and_takes_long_samples(trained, tmp_path):
    # What `attncli.files.new_directory` leaves when its process is killed: its staging
    # directory, half written, and no process holding it.
    abandoned = tmp_path / ".export.k1ll3d_x"
    (abandoned / "variables").mkdir(parents=True)
    (abandoned / "saved_model.pb").write_bytes(b"half")
    # Two samples of 70,000 characters: together past what one argument list may hold.
    sample = "x" * 70_000
    # The export in this process: its check's process, to which the samples go, is the
    # point.
    result = CliRunner().invoke(app, ["export", str(trained), str(tmp_path / "export"),
                                      "--sample", sample, "--sample", sample],
                                env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output
    assert f"removed {abandoned}, what an interrupted export to {tmp_path / 'export'} left" \
        in result.stderr
    assert not abandoned.exists()
    assert (tmp_path / "export" / "saved_model.pb").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["export"]
    assert max(map(len, result.stderr.splitlines())) < 400


@pytest.mark.slow
def test_what_a_killed_export_leaves_is_what_the_next_one_clears(trained, tmp_path):
    export = start("export", trained, tmp_path / "export", cwd=tmp_path)
    try:
        wait_for(lambda: any(path.name.startswith(".export.") for path in tmp_path.iterdir()),
                 export)
        live = [path for path in tmp_path.iterdir() if path.name.startswith(".export.")]
        assert clear_abandoned(tmp_path / "export") == []  # its writer holds it
    finally:
        export.kill()
        export.communicate()
    assert clear_abandoned(tmp_path / "export") == live
    assert list(tmp_path.iterdir()) == []


def test_a_staging_directory_held_by_its_writer_is_kept(tmp_path):
    live, dead = tmp_path / ".export.l1ve_abc", tmp_path / ".export.ready.d3ad_abc"
    live.mkdir()
    dead.mkdir()
    (tmp_path / ".export.notmine").mkdir()  # not a name attncli gives: never touched
    descriptor = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        assert clear_abandoned(tmp_path / "export") == [dead]
    finally:
        os.close(descriptor)
    assert live.is_dir() and (tmp_path / ".export.notmine").is_dir()


@pytest.mark.slow
def test_a_corpus_of_no_usable_pair_says_why(tmp_path):
    corpus = tmp_path / "binary.tsv"
    corpus.write_bytes(bytes(range(256)) * 40)
    config = tmp_path / "binary.yaml"
    config.write_text(f"data: {{format: tsv, train: {corpus}, valid_size: 60, test_size: 30}}\n")
    message = command_error("train", config, "--run-dir", tmp_path / "run")
    assert f"no usable pair was read: {corpus}: " in message and "bad line" in message
    assert "60 + 30" not in message
    assert not (tmp_path / "run").exists()


def test_an_abandoned_model_staging_next_to_a_run_is_not_the_export_s(tmp_path):
    # `clear_abandoned` takes only the names of its destination's staging directories.
    (tmp_path / ".model.abcd1234").mkdir()
    assert clear_abandoned(tmp_path / "export") == []
    assert (tmp_path / ".model.abcd1234").is_dir()
