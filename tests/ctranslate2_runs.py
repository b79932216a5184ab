"""A tiny Transformer trained once a session and exported for CTranslate2 (`exported`,
a fixture), for the tests of the export and of the server's ctranslate2 engine."""

import pytest
from attncli_runs import TINY, attncli, succeeds
from built_once import built_once

TRANSFORMER = ("model.encoder=self-attention", "model.decoder=self-attention",
               "model.score=scaled_dot", "model.embedding_dim=32", "model.heads=4",
               "model.feed_forward_dim=64", "model.encoder_layers=2", "model.decoder_layers=2")



def train_transformer(work):
    overrides = [argument for setting in TRANSFORMER for argument in ("--set", setting)]
    succeeds(attncli("train", TINY, "--run-dir", "run", "--set", "training.epochs=1",
                     "--set", "decoding.beam_size=5", *overrides, cwd=work))
    result = succeeds(attncli("export", "run", "exported", "--format", "ctranslate2",
                              cwd=work))
    (work / "export.stderr").write_text(result.stderr, "utf-8")


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """`(run, export)`: the tiny Transformer and its export, made once a session."""
    work = built_once(tmp_path_factory, "tiny-transformer-ctranslate2", train_transformer)
    return work / "run", work / "exported"


def validation_sentences(run):
    from attncli.data.sources import read_splits
    from attncli.config.run import load_run_config

    splits = read_splits(load_run_config(run / "config.yaml").data, data_dir=run)
    return [source for source in splits.valid.sources if source.strip()]
