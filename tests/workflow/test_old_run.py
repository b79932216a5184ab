"""A run written by attncli 0.1.0 before its modules moved into sub-packages still works.

`tests/fixtures/run-0.1.0` is a run directory made by `attncli train` at commit 86e004a
(the tiny configuration with an 8-unit model and vocabularies of 80, one epoch): run
format 1, its checkpoints, its kept model and its test outputs. A copy of it must
translate as it did, be inspected, and resume training from its checkpoint (each
command in the test's process: what this attncli reads of the files is the point).
"""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.data.corpora import read_bundled, split_corpus

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run-0.1.0"

pytestmark = pytest.mark.slow


def attncli(*args):
    """`attncli ARGS` in this process, which must succeed; piped, as a subprocess's
    output is (no COLUMNS or LINES)."""
    result = CliRunner().invoke(app, [str(arg) for arg in args],
                                env={"COLUMNS": None, "LINES": None})
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def old_run(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    return run


def test_old_run_translates_its_test_sentences_as_it_did(old_run):
    # The run's test split: the bundled pairs as its config.yaml reads and carves them.
    corpus = read_bundled("spa", limit=600)
    sources, _ = split_corpus(corpus, valid=60, test=30, seed=0).test.references()
    recorded = (old_run / "test.outputs.txt").read_text(encoding="utf-8").splitlines()
    assert len(recorded) == len(sources)
    result = attncli("translate", old_run, *sources[:3])
    assert result.stdout.splitlines() == recorded[:3]


def test_old_run_is_inspected(old_run):
    result = attncli("inspect-weights", old_run, "--text", "Tengo hambre.", "--step", "1")
    assert "output token 1" in result.stdout
    assert "4. sum" in result.stdout


def test_old_run_resumes_from_its_checkpoint(old_run):
    result = attncli("train", "--resume", "--run-dir", old_run, "--set", "training.epochs=2")
    # The console wraps long lines: compare without the white space.
    assert "ckpt-7:epoch2,batch0" in "".join(result.stderr.split())
    assert json.loads(result.stdout)["epochs"] == 2
    records = [
        json.loads(line)
        for line in (old_run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert [record["epoch"] for record in records] == [1, 2]
    assert records[1]["step"] > records[0]["step"] == 28
