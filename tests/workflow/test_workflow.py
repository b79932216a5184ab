"""train → translate → inspect-weights → resume, as a user runs them: subprocesses
(translate's formats, and its lines from arguments and from a file, are checked in this
process; from stdin, a pipe of a subprocess; the resumes of a finished run and of a run
killed by `kill -9`, in this process too: what they leave in the run is the point).

The runs use `configs/tiny-test.yaml` (600 bundled pairs, a 32-unit model): seconds
of training, enough to exercise every path. The finished run most tests read is the
session's `attncli_runs.trained_two_epochs` (the config's two epochs, with a
learning-rate warmup for test_events, which reads it too).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attncli_process import attncli
from attncli_runs import train_tiny, trained_two_epochs  # noqa: F401 (a fixture)
from built_once import built_once
from cli_errors import one_line_error
from process_watch import communicate, wait_until
from shared_data import shared_data
from typer.testing import CliRunner

from attncli.cli.app import app

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny-test.yaml"

pytestmark = pytest.mark.slow


@pytest.fixture
def trained(trained_two_epochs):  # noqa: F811 (the fixture)
    """The session's finished two-epoch run and what its training printed: `(run,
    result)`. Read only: a test that changes it works on a copy."""
    return trained_two_epochs


def test_train_writes_a_complete_run(trained):
    run, result = trained
    summary = json.loads(result.stdout)
    assert summary["epochs"] == 2
    for name in ("run.json", "config.yaml", "source.vocab.txt", "target.vocab.txt",
                 "metrics.jsonl", "train.log", "model/config.json"):
        assert (run / name).is_file(), name
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [record["epoch"] for record in records] == [1, 2]
    assert records[1]["train_loss"] < records[0]["train_loss"]
    assert {"bleu", "chrf", "valid_loss"} <= set(records[0])
    # progress went to stderr, the summary alone to stdout
    assert "valid loss" in result.stderr


def test_train_scores_the_best_model_on_the_test_split(trained):
    run, result = trained
    summary = json.loads(result.stdout)
    test = json.loads((run / "test.json").read_text())
    assert test["sentences"] == 30 and test["references"] == "normalised"
    assert test["decoding"]["beam_size"] == 2
    assert summary["test"]["bleu"] == test["bleu"]
    assert 0 <= test["bleu"] <= test["bleu_lowercase"] <= 100
    outputs = (run / "test.outputs.txt").read_text().splitlines()
    assert len(outputs) == 30


def test_pronunciation_test_split_is_scored_against_every_reference(tmp_path):
    from attncli.data.readers import read_pronunciations
    from attncli.search.metrics import pronunciation_scores

    data = shared_data("cmudict")
    config = tmp_path / "g2p.yaml"
    config.write_text(
        "name: g2p\n"
        "data:\n"
        "  format: pronunciations\n"
        "  train: g014b2b.train\n"
        "  test: g014b2b.test\n"
        "  limit: 150\n"
        "  valid_size: 20\n"
        "  split_by: sources\n"
        "  source: {level: char, normalization: null, lowercase: true, vocab_size: null}\n"
        "  target: {level: word, normalization: null, lowercase: false, vocab_size: null}\n"
        "  batch_size: 32\n"
        "model: {embedding_dim: 16, units: 32}\n"
        "training: {epochs: 1, learning_rate: 0.01, eval_sentences: 20}\n"
        "decoding: {beam_size: 2, alpha: 0.0}\n"
    )
    result = attncli("train", config, "--data-dir", data, "--run-dir", "run", cwd=tmp_path)
    run = tmp_path / "run"
    test = json.loads((run / "test.json").read_text())
    words, references = read_pronunciations(data / "g014b2b.test", limit=150).references()
    assert len(words) < 150  # several pronunciations of one word are one test item
    outputs = (run / "test.outputs.txt").read_text().split("\n")[:-1]
    assert len(outputs) == len(words) == test["sentences"] == test["words"]
    expected = pronunciation_scores(
        [output.split() for output in outputs],
        [[reference.split() for reference in options] for options in references],
    )
    assert (test["per"], test["wer"]) == (expected.per, expected.wer)
    assert test["references"] == "raw"
    assert json.loads(result.stdout)["test"]["wer"] == test["wer"]


def translate(run, *args):
    """`attncli translate RUN ARGS` in this process, for what is not about the process."""
    result = CliRunner().invoke(app, ["translate", str(run), *map(str, args)])
    assert result.exit_code == 0, result.output
    return result


def train_here(*args):
    """`attncli train ARGS` in this process, which must succeed; as wide as a subprocess's
    stderr (Rich wraps no line)."""
    result = CliRunner().invoke(app, ["train", *map(str, args)], env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output
    return result


def test_translate_is_line_aligned_from_arguments_file_and_stdin(trained, tmp_path):
    run, _ = trained
    lines = ["Tengo un gato.", "", "¿Dónde está?"]
    from_args = translate(run, *lines).stdout.splitlines()
    assert len(from_args) == 3 and from_args[1] == "" and from_args[0]
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert translate(run, "--input", source).stdout.splitlines() == from_args
    stdin = attncli("translate", run, cwd=tmp_path, stdin="\n".join(lines) + "\n")
    assert stdin.stdout.splitlines() == from_args


def test_translate_formats_nbest_and_reference(trained, tmp_path):
    run, _ = trained
    as_json = translate(run, "Tengo un gato.", "--format", "json", "--beam", "3", "--n-best", "2")
    [record] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert len(record["hypotheses"]) == 2
    best = record["hypotheses"][0]
    assert best["score"] >= record["hypotheses"][1]["score"]
    assert len(best["weights"]) == len(best["tokens"])
    assert all(len(row) == len(record["source_tokens"]) for row in best["weights"])
    tsv = translate(run, "Hola.", "--format", "tsv", "--n-best", "2", "--beam", "2"
                    ).stdout.splitlines()
    assert [row.split("\t")[:2] for row in tsv] == [["1", "1"], ["1", "2"]]
    reference = tmp_path / "reference.txt"
    reference.write_text("I have a cat.\n", encoding="utf-8")
    scored = translate(run, "Tengo un gato.", "--reference", reference)
    assert "BLEU" in scored.stderr and "chrF" in scored.stderr
    assert len(scored.stdout.splitlines()) == 1


def test_inspect_weights_heatmap_png_step_and_params(trained, tmp_path):
    run, _ = trained
    picture = tmp_path / "attention.png"
    result = attncli("inspect-weights", run, "--text", "Tengo un gato.", "--png", picture,
                     "--step", "1", "--params", "--beam", "2", cwd=tmp_path)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = result.stdout
    assert "attention weights (beam 2)" in out
    assert "tengo" in out and "gato" in out
    assert "1. score" in out and "2. softmax" in out and "context" in out
    weights_table = out[out.index("model weights"):]
    rows = [line for line in weights_table.splitlines() if line.startswith("│")]
    assert "attention" in rows[0]  # the attention's own matrices come first


def test_resume_of_a_finished_run_extends_it_only_in_length(trained, tmp_path):
    run, _ = trained
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(run), str(copy)], check=True)
    again = train_here("--resume", "--run-dir", copy)
    assert json.loads(again.stdout)["epochs"] == 2  # already complete: nothing to redo
    assert "finished: 2 epochs trained" in again.stderr
    refused = attncli("train", "--resume", "--run-dir", copy, "--set", "model.units=64",
                      cwd=tmp_path, check=False)
    assert "--set model.units cannot change a run that is resumed" in one_line_error(refused)
    longer = train_here("--resume", "--run-dir", copy, "--set", "training.epochs=3")
    assert json.loads(longer.stdout)["epochs"] == 3
    assert "epochs: 3" in (copy / "config.yaml").read_text()


def test_kill_9_in_the_middle_then_resume_and_finish(tmp_path):
    """A training killed after its first checkpoint resumes from it (in this process:
    what the killed one left is the point) and finishes. No test split: scoring it is
    not what is tested."""
    args = ["train", TINY, "--run-dir", "runs/killed", "--set", "training.epochs=2",
            "--set", "training.checkpoint_every=3", "--set", "data.test_size=0"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    process = subprocess.Popen([sys.executable, "-m", "attncli", *map(str, args)], cwd=tmp_path,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    index = tmp_path / "runs" / "killed" / "checkpoints" / "checkpoint"
    try:
        wait_until(index.exists, process)
        time.sleep(1.0)
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        communicate(process)
    resumed = CliRunner().invoke(app, ["train", "--resume", "--run-dir",
                                       str(tmp_path / "runs" / "killed")])
    assert resumed.exit_code == 0, resumed.output
    assert "resuming from" in resumed.stderr
    assert json.loads(resumed.stdout)["epochs"] == 2
    records = [json.loads(line) for line in
               (tmp_path / "runs/killed/metrics.jsonl").read_text().splitlines()]
    assert records[-1]["epoch"] == 2


def test_sigterm_writes_a_checkpoint_and_says_how_to_resume(tmp_path):
    args = ["train", TINY, "--run-dir", "runs/stopped", "--set", "training.epochs=50"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    process = subprocess.Popen([sys.executable, "-m", "attncli", *map(str, args)], cwd=tmp_path,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "runs" / "stopped" / "metrics.jsonl"
    try:
        wait_until(metrics.exists, process)  # its first evaluation
        process.send_signal(signal.SIGTERM)
        _, stderr = communicate(process)
    finally:
        process.kill()
    assert process.returncode == 143
    assert "checkpoint saved" in stderr and "attncli train --resume --run-dir" in stderr
    assert (tmp_path / "runs/stopped/checkpoints/checkpoint").exists()


def test_same_seed_same_run(tmp_path_factory, tmp_path):
    """A second process trains the tiny run of one epoch the session trained once."""
    first = built_once(tmp_path_factory, "tiny-one-epoch", train_tiny) / "run"
    attncli("train", TINY, "--run-dir", "again", "--set", "training.epochs=1", cwd=tmp_path)
    losses = []
    for run in (first, tmp_path / "again"):
        record = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
        losses.append((record["train_loss"], record["valid_loss"], record["bleu"]))
    assert losses[0] == losses[1]


def test_damaged_checkpoints_are_one_line(trained, tmp_path):
    run, _ = trained
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(run), str(copy)], check=True)
    for data in (copy / "checkpoints").glob("*.data-*"):
        data.write_bytes(b"not a checkpoint")
    result = attncli("train", "--resume", "--run-dir", copy, cwd=tmp_path, check=False)
    assert "no checkpoint of" in one_line_error(result) and "--overwrite" in result.stderr
