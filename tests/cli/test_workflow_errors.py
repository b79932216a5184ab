"""Every user error of train, translate and inspect-weights: one line, exit code 2.

These fail before TensorFlow is needed, so they run in-process.
"""

import json

import pytest
from cli_errors import one_line_error
from typer.testing import CliRunner

from attncli.cli.app import app


def run(*args, cwd=None, input=None, monkeypatch=None):
    if cwd is not None:
        monkeypatch.chdir(cwd)
    return CliRunner().invoke(app, [str(arg) for arg in args], input=input)


@pytest.fixture
def model_dir(tmp_path):
    """A directory that looks like a model to the checks that run before loading it."""
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    return directory


def test_translate_missing_run(tmp_path):
    result = run("translate", tmp_path / "nope", "hola")
    assert "no such run directory" in one_line_error(result)


def test_translate_run_without_a_model_yet(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"format": 1, "attncli": "0.1.0"}))
    assert "has no trained model yet" in one_line_error(run("translate", run_dir, "hola"))


def test_translate_run_of_an_incompatible_version(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"format": 7, "attncli": "9.9"}))
    message = one_line_error(run("translate", run_dir, "hola"))
    assert "run format 7" in message and "reads format 1" in message


def test_translate_empty_and_unreadable_input(model_dir, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert "is empty" in one_line_error(run("translate", model_dir, "--input", empty))
    binary = tmp_path / "latin1.txt"
    binary.write_bytes("caf\xe9\n".encode("latin-1"))
    assert "not UTF-8" in one_line_error(run("translate", model_dir, "--input", binary))
    absent = tmp_path / "absent.txt"
    assert "no such file" in one_line_error(run("translate", model_dir, "--input", absent))


def test_translate_arguments_and_input_together(model_dir, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hola\n")
    result = run("translate", model_dir, "hola", "--input", source)
    assert "not both" in one_line_error(result)


def test_translate_unknown_format(model_dir):
    assert "choose one of text, tsv, json" in one_line_error(
        run("translate", model_dir, "hola", "--format", "xml")
    )


def test_train_bad_yaml(tmp_path, monkeypatch):
    config = tmp_path / "bad.yaml"
    config.write_text("model:\n  units: [1, 2\n")
    message = one_line_error(run("train", config, cwd=tmp_path, monkeypatch=monkeypatch))
    assert "bad.yaml" in message and "line" in message


def test_train_unknown_key_names_its_path(tmp_path, monkeypatch):
    config = tmp_path / "typo.yaml"
    config.write_text("model:\n  unit: 64\n")
    message = one_line_error(run("train", config, cwd=tmp_path, monkeypatch=monkeypatch))
    assert "model.unit" in message


def test_train_bad_override_value(tmp_path, monkeypatch):
    result = run("train", "--set", "training.epochs=many", cwd=tmp_path, monkeypatch=monkeypatch)
    assert ("training.epochs must be an integer. Received: training.epochs='many'"
            in one_line_error(result))
    result = run("train", "--set", "data.source.level=bytes", cwd=tmp_path,
                 monkeypatch=monkeypatch)
    assert "data.source.level" in one_line_error(result)


def test_train_bundled_corpus_with_file_paths(tmp_path, monkeypatch):
    result = run("train", "--set", "data.train=mine.tsv", cwd=tmp_path, monkeypatch=monkeypatch)
    message = one_line_error(result)
    assert "format 'bundled'" in message and "data.train" in message


def test_train_key_given_twice(tmp_path, monkeypatch):
    config = tmp_path / "twice.yaml"
    config.write_text("training:\n  epochs: 2\n  epochs: 3\n")
    message = one_line_error(run("train", config, cwd=tmp_path, monkeypatch=monkeypatch))
    assert "'epochs' is given twice at line 3" in message


def test_train_vocabulary_size_belongs_to_the_data(tmp_path, monkeypatch):
    result = run("train", "--set", "model.source_vocab_size=100", cwd=tmp_path,
                 monkeypatch=monkeypatch)
    assert "data.source.vocab_size" in one_line_error(result)


def test_train_missing_config(tmp_path, monkeypatch):
    result = run("train", tmp_path / "absent.yaml", cwd=tmp_path, monkeypatch=monkeypatch)
    assert "no such config file" in one_line_error(result)


def test_train_resume_and_overwrite_together(tmp_path, monkeypatch):
    result = run("train", "--resume", "--overwrite", cwd=tmp_path, monkeypatch=monkeypatch)
    assert "choose one" in one_line_error(result)


def test_train_resume_of_a_missing_run(tmp_path, monkeypatch):
    result = run("train", "--resume", "--run-dir", tmp_path / "nope", cwd=tmp_path,
                 monkeypatch=monkeypatch)
    assert "no such run directory" in one_line_error(result)


def test_train_refuses_to_overwrite_a_run_silently(tmp_path, monkeypatch):
    run_dir = tmp_path / "runs" / "default"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"format": 1, "attncli": "0.1.0"}))
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    result = run("train", cwd=tmp_path, monkeypatch=monkeypatch)
    assert "--resume" in one_line_error(result) and "--overwrite" in result.stderr


def test_train_missing_data_file(tmp_path, monkeypatch):
    config = tmp_path / "tsv.yaml"
    config.write_text("data:\n  format: tsv\n  train: corpus/absent.tsv\n")
    result = run("train", config, "--run-dir", tmp_path / "r", cwd=tmp_path,
                 monkeypatch=monkeypatch)
    assert "data.train: no such file" in one_line_error(result)


@pytest.mark.parametrize("resume", [[], ["--resume", "--run-dir", "runs/default"]])
def test_train_refuses_a_data_dir_that_is_no_folder(tmp_path, monkeypatch, resume):
    # The bundled corpus reads no file: the folder was ignored, whatever it named. (The
    # bad budget stops a command that would ignore it before it trains anything.)
    (tmp_path / "pairs.tsv").write_text("a\tb\n")
    for data_dir in (tmp_path / "nonexistent", tmp_path / "pairs.tsv"):
        result = run("train", "--data-dir", data_dir, "--set", "training.max_minutes=-1",
                     *resume, cwd=tmp_path, monkeypatch=monkeypatch)
        assert f"--data-dir {data_dir}: no such folder" in one_line_error(result)
    assert not (tmp_path / "runs").exists()


def test_inspect_needs_something_to_show(model_dir):
    assert "nothing to inspect" in one_line_error(run("inspect-weights", model_dir))
    assert "need the sentence" in one_line_error(
        run("inspect-weights", model_dir, "--png", "x.png")
    )
