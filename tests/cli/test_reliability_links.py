"""Nothing outside a run directory is ever written, truncated or deleted by `attncli train`.

A run directory can come from someone else (copied, unpacked, shared): a symbolic link
in it, or a checkpoint index naming files elsewhere, must not turn a training into a
write or a delete outside it. Real links and real crafted files, through the command
(`python -m attncli` subprocesses, but for the resume that must succeed, in the test's
process: what it leaves is the point there); the session's tiny run is trained once,
each test works on a copy.
"""

import os
import shutil
import time

import pytest
from attncli_runs import (  # noqa: F401  (run and trained are fixtures)
    TINY, attncli, run, trained,
)
from cli_errors import one_line_error
from typer.testing import CliRunner

from attncli.cli.app import app


def snapshot(path):
    """Every file under `path` (or `path` itself) with its bytes: what must not change."""
    if path.is_file():
        return {".": path.read_bytes()}
    return {
        str(file.relative_to(path)): file.read_bytes()
        for file in sorted(path.rglob("*")) if file.is_file()
    }


def link_outside(run, name, outside):
    """Move `run/name` to `outside/...` and leave a symbolic link to it in its place."""
    entry = run / name
    target = outside / name.replace("/", "_")
    shutil.move(entry, target)
    os.symlink(target, entry)
    return entry, target


def newest_checkpoint(run):
    return (run / "checkpoints" / "checkpoint").read_text().split('"')[1]


# Every file and folder a run writes (the checkpoint files, names vary, stand for theirs).
WRITTEN = [
    ".writer.lock", "train.log", "metrics.jsonl", "config.yaml", "run.json",
    "source.vocab.txt", "target.vocab.txt", "source.tokenizer.json", "target.tokenizer.json",
    "test.json", "test.outputs.txt", "checkpoints/checkpoint", "checkpoints/NEWEST.index",
    "checkpoints/NEWEST.data-00000-of-00001", "model/config.json",
    "model/model.weights.h5", "model/target.vocab.txt", "model", "checkpoints", "events",
    "events/train", "events/valid",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", WRITTEN)
def test_a_link_in_a_resumed_run_is_refused_and_its_target_untouched(run, tmp_path, name):
    outside = tmp_path / "outside"
    outside.mkdir()
    name = name.replace("NEWEST", newest_checkpoint(run))
    entry, target = link_outside(run, name, outside)
    before = snapshot(target)
    message = one_line_error(attncli("train", "--resume", "--run-dir", run,
                                     "--set", "training.epochs=2", cwd=tmp_path))
    assert f"{entry} is a symbolic link (to '" in message
    assert snapshot(target) == before
    assert entry.is_symlink()


@pytest.mark.slow
@pytest.mark.parametrize("name", [".writer.lock", "train.log", "metrics.jsonl", "model",
                                  "checkpoints", "events"])
def test_a_link_in_an_overwritten_run_is_refused_and_its_target_untouched(run, tmp_path, name):
    outside = tmp_path / "outside"
    outside.mkdir()
    entry, target = link_outside(run, name, outside)
    before = snapshot(target)
    message = one_line_error(attncli("train", TINY, "--overwrite", "--run-dir", run,
                                     cwd=tmp_path))
    assert f"{entry} is a symbolic link" in message
    assert snapshot(target) == before


@pytest.mark.slow
def test_a_lock_link_in_a_new_run_directory_is_refused(tmp_path):
    precious = tmp_path / "precious"
    precious.write_text("kept\n")
    directory = tmp_path / "run"
    directory.mkdir()
    os.symlink(precious, directory / ".writer.lock")
    message = one_line_error(attncli("train", TINY, "--run-dir", directory, cwd=tmp_path))
    assert f"{directory / '.writer.lock'} is a symbolic link" in message
    assert precious.read_text() == "kept\n"


@pytest.mark.slow
@pytest.mark.parametrize("name", [".writer.lock", "train.log", "metrics.jsonl"])
def test_a_hard_link_in_a_run_is_refused_and_its_other_name_untouched(run, tmp_path, name):
    """A file of the run that also has a name outside it: the lock would truncate it,
    the log and metrics would grow it. One line naming it, the outside file as it was."""
    precious = tmp_path / "precious"
    precious.write_text("kept\n")
    entry = run / name
    entry.unlink(missing_ok=True)
    os.link(precious, entry)
    message = one_line_error(attncli("train", "--resume", "--run-dir", run,
                                     "--set", "training.epochs=2", cwd=tmp_path))
    assert f"{entry} is a hard link (2 names)" in message
    assert precious.read_text() == "kept\n"


@pytest.mark.slow
def test_an_index_naming_files_outside_the_run_is_rebuilt_and_they_survive(run, tmp_path):
    outside = tmp_path / "else" / "where"
    outside.mkdir(parents=True)
    precious = {}
    for name in ("precious.index", "precious.data-00000-of-00001", "ckpt-1.index",
                 "ckpt-1.data-00000-of-00001"):
        (outside / name).write_text(f"{name} is not attncli's\n")
        precious[name] = (outside / name).read_bytes()
    checkpoints = run / "checkpoints"
    newest = newest_checkpoint(run)
    # The outside paths come first: the oldest, those a manager keeping 2 deletes first.
    # TensorFlow deletes only the paths stamped later than `last_preserved_timestamp`.
    stamp = time.time() - 60
    crafted = (
        f'model_checkpoint_path: "{newest}"\n'
        f'all_model_checkpoint_paths: "{outside / "precious"}"\n'
        f'all_model_checkpoint_paths: "{os.path.relpath(outside / "ckpt-1", checkpoints)}"\n'
        f'all_model_checkpoint_paths: "{newest}"\n'
        + "".join(f"all_model_checkpoint_timestamps: {stamp + n}\n" for n in range(3))
        + f"last_preserved_timestamp: {stamp - 60}\n"
    )
    (checkpoints / "checkpoint").write_text(crafted)
    # As wide as attncli_runs's subprocesses: Rich wraps no progress line (a path).
    result = CliRunner().invoke(app, ["train", "--resume", "--run-dir", str(run),
                                      "--set", "training.epochs=2"], env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output
    assert {name: (outside / name).read_bytes() for name in precious if
            (outside / name).exists()} == precious
    assert "else/where/precious', which is not a checkpoint of" in result.stderr
    assert "(kept as checkpoint.damaged)" in result.stderr
    assert f"resuming from {checkpoints / newest}: epoch 2, batch 0" in result.stderr
    assert (checkpoints / "checkpoint.damaged").read_text() == crafted
    # The rebuilt index, as TensorFlow rewrote it since, names only checkpoints inside.
    index = (checkpoints / "checkpoint").read_text()
    assert str(outside) not in index and ".." not in index


@pytest.mark.parametrize("named, problem", [
    ("/else/where/ckpt-1", "names '/else/where/ckpt-1', which is not a checkpoint of"),
    ("../ckpt-1", "names '../ckpt-1', which is not a checkpoint of"),
    ("sub/ckpt-1", "names 'sub/ckpt-1', which is not a checkpoint of"),
    ("precious", "names 'precious', which is not a checkpoint of"),
    ("ckpt-9", "names ckpt-9, which is not there"),
    ("../checkpoints/ckpt-1", None),  # a roundabout name of a checkpoint inside
    ("ckpt-1", None),
])
def test_an_index_is_sound_only_when_it_names_checkpoints_inside(tmp_path, named, problem):
    from attncli.training.checkpoint_files import repair_index

    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "sub").mkdir(parents=True)
    for folder in (checkpoints, checkpoints / "sub", tmp_path):
        (folder / "ckpt-1.index").write_text("")
    (checkpoints / "precious.index").write_text("")
    index = f'model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "{named}"\n'
    (checkpoints / "checkpoint").write_text(index)
    repaired = repair_index(checkpoints)
    if problem is None:
        assert repaired is None
        assert (checkpoints / "checkpoint").read_text() == index
    else:
        assert problem in repaired and "rebuilt it from the checkpoints found: ckpt-1" in repaired
        assert (checkpoints / "checkpoint").read_text() == (
            'model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n'
        )
    assert (tmp_path / "ckpt-1.index").exists() and (checkpoints / "precious.index").exists()
