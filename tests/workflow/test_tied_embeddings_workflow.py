"""A run with one vocabulary and one embedding matrix, as a user runs it: `attncli
train`, translate, inspect-weights and resume, in this process (each runs as a process of
its own in test_workflow); and trained on 2 mirrored CPU replicas, step by step as on one
device."""

import json
import sys

import numpy as np
import pytest
from attncli_runs import ENV, REPO, TINY
from process_watch import run
from typer.testing import CliRunner

from attncli.cli.app import app

pytestmark = pytest.mark.slow

SHARED = ["data.shared_vocab=true", "model.tie_embeddings=all", "training.epochs=1"]
MODELS = {
    "rnn": [],
    "self-attention": ["model.encoder=self-attention", "model.decoder=self-attention"],
}


def in_process(command, *args):
    """`attncli COMMAND ARGS` in this process, which must succeed."""
    # As wide as attncli_runs's subprocesses: Rich wraps no weight's name.
    result = CliRunner().invoke(app, [command, *map(str, args)], env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output
    return result


def sets(overrides):
    return [argument for override in overrides for argument in ("--set", override)]


@pytest.fixture(scope="module", params=list(MODELS))
def tied_run(request, tmp_path_factory):
    work = tmp_path_factory.mktemp(f"tied-{request.param}")
    in_process("train", TINY, "--run-dir", work / "run", *sets(SHARED + MODELS[request.param]))
    return work / "run"


def test_the_run_keeps_one_vocabulary_of_both_languages_under_both_names(tied_run):
    source = (tied_run / "source.vocab.txt").read_text(encoding="utf-8")
    assert source == (tied_run / "target.vocab.txt").read_text(encoding="utf-8")
    tokens = set(source.split("\n"))
    assert {"estoy", "tengo", "i", "am", "tom"} <= tokens
    model = json.loads((tied_run / "model" / "config.json").read_text())["model"]
    assert model["tie_embeddings"] == "all"
    assert model["source_vocab_size"] == model["target_vocab_size"] == len(tokens) - 1


def test_a_tied_run_translates_and_is_inspected(tied_run):
    sources = ["Tengo hambre.", "Estoy cansado.", "Hola."]
    greedy = in_process("translate", tied_run, *sources)
    beam = in_process("translate", tied_run, *sources, "--beam", "2", "--n-best", "2",
                      "--format", "tsv")
    assert len(greedy.stdout.splitlines()) == 3
    assert [line.split("\t")[:2] for line in beam.stdout.splitlines()] == [
        [str(i), str(rank)] for i in (1, 2, 3) for rank in (1, 2)
    ]
    inspected = in_process("inspect-weights", tied_run, "--text", "Tengo hambre.",
                           "--params").stdout
    assert "shared_embedding/embeddings" in inspected
    assert "output_projection/bias" in inspected
    assert "output_projection/kernel" not in inspected
    assert "encoder/embedding" not in inspected


def test_a_tied_run_resumes_from_its_checkpoint(tied_run):
    result = in_process("train", "--resume", "--run-dir", tied_run, "--set", "training.epochs=2")
    assert "epoch 2, batch 0" in result.stderr
    assert json.loads(result.stdout)["epochs"] == 2


@pytest.mark.xdist_group("distribute")
def test_mirrored_replicas_train_the_tied_model_as_one_device(tmp_path):
    helper = REPO / "tests" / "distributed_run.py"
    overrides = SHARED + ["training.average_decay=0.9"]
    result = run([sys.executable, str(helper), str(TINY), str(tmp_path), "--cpu-devices", "2",
                  *sets(overrides)], env=ENV)
    assert result.returncode == 0, result.stderr
    curves = json.loads(result.stdout)
    single, mirrored = curves["none"], curves["mirrored"]
    assert (single["replicas"], mirrored["replicas"]) == (1, 2)
    assert len(single["losses"]) > 20
    np.testing.assert_allclose(mirrored["losses"], single["losses"], rtol=1e-5)
