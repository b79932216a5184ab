"""The files of a model directory: a side at level `sentencepiece` keeps its model there,
and a directory without it is incomplete like one without any other file (an interrupted
save's copy is not put back, `--init-from` names it before TensorFlow loads)."""

import dataclasses
import json
import shutil

import pytest
from shared_data import shared_data

from attncli.config.model import ModelConfig
from attncli.config.run import load_run_config
from attncli.data.readers import read_tsv
from attncli.data.tokenization import Tokenizer
from attncli.errors import AttncliError
from attncli.model.saving import (
    CONFIG_FILE, FORMAT, MODEL_FILES, VERSION, WEIGHTS_FILE, missing_model_file, model_files,
)
from attncli.training.init_from import check_init_from
from attncli.training.leftovers import clear_leftovers
from attncli.training.run_directory import MARKER, RUN_FORMAT, RunDirectory
from tests.attncli_runs import TINY



@pytest.fixture(scope="module")
def texts():
    return read_tsv(shared_data("spa-eng/spa.txt")).sources[:2000]


def write_model_directory(directory, levels, texts):
    """A model directory's files as `save_model` leaves them, the tokenizers and config
    real (the tokenizers written by `Tokenizer.save`), the weights an empty stand-in."""
    directory.mkdir(parents=True)
    # TINY's model, as a run of it keeps.
    model = ModelConfig(**dataclasses.asdict(load_run_config(TINY).model),
                        source_vocab_size=700, target_vocab_size=700).to_dict()
    (directory / CONFIG_FILE).write_text(json.dumps(
        {"format": FORMAT, "version": VERSION, "model": model, "source_end": False,
         "metadata": {}}))
    (directory / WEIGHTS_FILE).write_bytes(b"")
    for side, level in zip(("source", "target"), levels):
        tokenizer = Tokenizer(level)
        tokenizer.with_vocabulary(tokenizer.build_vocabulary(texts, 700)).save(directory, side)
    return directory


@pytest.mark.parametrize("levels", [("word", "word"), ("sentencepiece", "word"),
                                    ("sentencepiece", "sentencepiece")])
def test_the_model_files_are_the_files_a_save_writes(tmp_path, levels, texts):
    directory = write_model_directory(tmp_path / "model", levels, texts)
    written = sorted(path.name for path in directory.iterdir())
    assert sorted(model_files(directory)) == written
    assert model_files(directory)[:len(MODEL_FILES)] == MODEL_FILES
    assert missing_model_file(directory) is None


def test_a_missing_sentencepiece_model_leaves_the_directory_incomplete(tmp_path, texts):
    directory = write_model_directory(tmp_path / "model", ("word", "sentencepiece"), texts)
    (directory / "target.sentencepiece.model").unlink()
    assert missing_model_file(directory) == "target.sentencepiece.model"
    (directory / "source.vocab.txt").unlink()
    # The first missing file in the order they are written.
    assert missing_model_file(directory) == "source.vocab.txt"


def test_an_unreadable_tokenizer_file_is_missing_itself_and_adds_no_model(tmp_path, texts):
    directory = write_model_directory(tmp_path / "model", ("sentencepiece", "word"), texts)
    (directory / "source.tokenizer.json").write_text("{")
    (directory / "source.sentencepiece.model").unlink()
    assert model_files(directory) == MODEL_FILES
    (directory / "source.tokenizer.json").unlink()
    assert missing_model_file(directory) == "source.tokenizer.json"


def make_run(path, levels, texts):
    """A run directory (no checkpoints) with its kept model."""
    path.mkdir()
    (path / MARKER).write_text(json.dumps({"format": RUN_FORMAT}))
    shutil.copy(TINY, path / "config.yaml")
    write_model_directory(path / "model", levels, texts)
    return RunDirectory(path)


@pytest.mark.parametrize("complete", [True, False])
def test_a_ready_model_is_put_back_only_with_its_sentencepiece_model(tmp_path, texts, complete):
    run = make_run(tmp_path / "run", ("word", "word"), texts)
    ready = write_model_directory(tmp_path / "run" / ".model.ready.a1b2c3d4",
                                  ("word", "sentencepiece"), texts)
    if not complete:
        (ready / "target.sentencepiece.model").unlink()
    notes = clear_leftovers(run)
    assert (run.model_dir / "target.sentencepiece.model").is_file() == complete
    assert any("restored the best model" in note for note in notes) == complete
    assert not list(run.path.glob(".model.*"))


def test_init_from_names_a_kept_model_missing_its_sentencepiece_model(tmp_path, texts):
    run = make_run(tmp_path / "run", ("sentencepiece", "word"), texts)
    check_init_from(run.path, load_run_config(TINY))
    (run.model_dir / "source.sentencepiece.model").unlink()
    with pytest.raises(AttncliError) as raised:
        check_init_from(run.path, load_run_config(TINY))
    assert str(raised.value) == (
        f"{run.model_dir / 'source.sentencepiece.model'} is missing: the kept model is "
        "incomplete; copy the run again, or give another --init-from"
    )
