"""A tiny run trained with guided alignment on the first 150 Hansards gold sentences.

`trained_guided` (import it into a test module) trains it once a session, in the test's
process, for every module and worker: test_guided_alignment resumes, fine-tunes and
exports it, test_alignment_layer adds an alignment layer to it. Read it only; copy it to
change it.
"""

import json
import re
import shutil

import pytest
from built_once import built_once
from shared_data import shared_data
from typer.testing import CliRunner

from attncli.cli.app import app


def write_gold_links(path):
    """The 447 gold sentences' sure links (talp, 1-indexed) as Pharaoh lines (0-indexed),
    English word first as in the gold file."""
    lines = []
    for line in shared_data("hansards-en-fr/test.talp").read_text().splitlines():
        sure = re.findall(r"(\d+)-(\d+)", line)
        lines.append(" ".join(f"{int(i) - 1}-{int(j) - 1}" for i, j in sure))
    path.write_text("\n".join(lines) + "\n")
    return path


def guided_config(data, limit):
    """A tiny guided run on the first `limit` gold sentences (links read up to the
    same line)."""
    return {
        "name": "guided",
        "data": {"format": "parallel", "directory": str(data), "train": "test",
                 "source_suffix": "en", "target_suffix": "fr", "limit": limit,
                 "valid_size": 20, "alignments": "gold.txt",
                 "source": {"level": "subword", "vocab_size": 400},
                 "target": {"level": "subword", "vocab_size": 400},
                 "max_length": 30, "batch_size": 32, "bucketing": False},
        "model": {"embedding_dim": 16, "units": 16},
        "training": {"epochs": 1, "learning_rate": 0.01, "eval_sentences": 5,
                     "guided_alignment": {"weight": 1.0}},
        "decoding": {"beam_size": 1},
    }


GUIDED_SENTENCES = 150


def train_guided(work):
    """`work/data` (the gold sentences and their links), `work/guided.yaml` and the run
    `attncli train guided.yaml` leaves in `work/run`."""
    data = work / "data"
    data.mkdir()
    for side in ("en", "fr"):
        shutil.copyfile(shared_data(f"hansards-en-fr/test.{side}"), data / f"test.{side}")
    write_gold_links(data / "gold.txt")
    config = work / "guided.yaml"
    config.write_text(json.dumps(guided_config(data, limit=GUIDED_SENTENCES)))
    result = CliRunner().invoke(app, ["train", str(config), "--run-dir", str(work / "run")],
                                env={"COLUMNS": "500"})
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="session")
def trained_guided(tmp_path_factory):
    """The guided run's directory: `data/`, `guided.yaml` and `run/`, trained once a
    session (one epoch of `guided_config` on the first 150 gold sentences)."""
    shared_data("hansards-en-fr/test.talp")  # skips here, not in the build, without them
    return built_once(tmp_path_factory, "guided-gold-150", train_guided)


def with_alignment_layer(run, directory):
    """The model of `run` saved into `directory` with a fresh alignment layer beside its
    own weights (what `--init-from` with `model.alignment_layer` starts from)."""
    import dataclasses

    from attncli.model.encoder_decoder import Seq2Seq
    from attncli.model.saving import load_matching_weights, save_model
    from attncli.search.loading import load_model

    loaded = load_model(run / "model")
    model = Seq2Seq(dataclasses.replace(loaded.model.config, alignment_layer=True))
    load_matching_weights(model, loaded.model.config, run / "model" / "model.weights.h5",
                          "the fixture run")
    save_model(directory, model, loaded.source_tokenizer, loaded.target_tokenizer,
               source_end=loaded.source_end)
    return directory
