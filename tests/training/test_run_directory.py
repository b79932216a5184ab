import json

import pytest

from attncli.errors import AttncliError
from attncli.training.run_directory import RUN_FORMAT, RunDirectory


def test_create_then_open(tmp_path):
    run = RunDirectory.create(tmp_path / "runs" / "tiny")
    assert json.loads(run.marker_path.read_text())["format"] == RUN_FORMAT
    assert RunDirectory.open(run.path).path == run.path


def test_existing_run_is_not_overwritten_silently(tmp_path):
    run = RunDirectory.create(tmp_path / "tiny")
    run.append_metrics({"epoch": 1})
    (run.checkpoint_dir).mkdir()
    (run.checkpoint_dir / "checkpoint").write_text("model_checkpoint_path: ckpt-1\n")
    with pytest.raises(AttncliError, match="--resume.*--overwrite"):
        RunDirectory.create(run.path)
    RunDirectory.create(run.path, overwrite=True)
    assert run.read_metrics() == []


@pytest.mark.parametrize(
    "prepare, message",
    [
        (lambda path: None, "no such run directory"),
        (lambda path: path.mkdir(), "not an attncli run directory"),
        (
            lambda path: (path.mkdir(), (path / "run.json").write_text("{broken")),
            "unreadable or damaged",
        ),
        (
            lambda path: (
                path.mkdir(),
                (path / "run.json").write_text('{"format": 99, "attncli": "9.0"}'),
            ),
            "run format 99; this attncli .* reads format 1",
        ),
    ],
)
def test_open_rejects_what_it_cannot_read(tmp_path, prepare, message):
    path = tmp_path / "run"
    prepare(path)
    with pytest.raises(AttncliError, match=message) as error:
        RunDirectory.open(path)
    assert "\n" not in str(error.value)


def test_metrics_survive_a_cut_last_line(tmp_path):
    run = RunDirectory.create(tmp_path / "run")
    run.append_metrics({"epoch": 1, "bleu": 3.5})
    with open(run.metrics_path, "a") as stream:
        stream.write('{"epoch": 2, "bl')
    assert run.read_metrics() == [{"bleu": 3.5, "epoch": 1}]


def test_a_run_that_never_checkpointed_can_start_again(tmp_path):
    run = RunDirectory.create(tmp_path / "tiny")
    run.append_metrics({"epoch": 1})
    RunDirectory.create(run.path)
    assert run.read_metrics() == []
