"""A recurrent run grown into a cascade: `attncli train CONFIG --init-from RUN` where
CONFIG has `model.encoder: cascade` and RUN's encoder is recurrent (Chen et al. 2018 stack
the cascade's self-attention blocks on a trained recurrent encoder)."""

import dataclasses
import json
import re
import shutil

import numpy as np
import pytest

from attncli.config.run import load_run_config
from attncli.errors import AttncliError
from attncli.training.init_from import check_init_from
from tests.attncli_runs import (  # noqa: F401  trained is a fixture
    TINY, build_finetuning, in_process, succeeds_here, trained,
)
from tests.cli_errors import one_line_error

# The tiny run's GRU encoder (sum of directions, 32 features) under two blocks.
GROW = ["model.encoder=cascade", "model.encoder_blocks=2", "model.heads=2"]


def inner(variable):
    """A variable's path below its model's name: `encoder/embedding/embeddings`."""
    return variable.path.split("/", 1)[1]


def test_the_blocks_keys_are_the_new_configuration_s(trained):
    config = load_run_config(TINY, GROW + ["model.feed_forward_dim=48", "model.norm=post",
                                           "model.activation=gelu", "model.dropout=0.3"])
    assert check_init_from(trained, config).model_dir == (trained / "model").resolve()
    gained = load_run_config(TINY, GROW + ["model.encoder_norm_gain=0.25"])
    assert check_init_from(trained, gained).model_dir == (trained / "model").resolve()


@pytest.mark.parametrize(("override", "named"), [
    (["model.encoder=self-attention"], "model.encoder is 'self-attention' here but 'rnn' in"),
    (GROW + ["model.units=16"], "model.units is 16 here but 32 in"),
    (GROW + ["model.encoder_layers=2"], "model.encoder_layers is 2 here but 1 in"),
    (GROW + ["model.merge_mode=concat"], "model.merge_mode is 'concat' here but 'sum' in"),
    (GROW + ["model.cell=lstm"], "model.cell is 'lstm' here but 'gru' in"),
])
def test_anything_else_stays_run_s(trained, override, named):
    with pytest.raises(AttncliError, match="^--init-from: ") as error:
        check_init_from(trained, load_run_config(TINY, override))
    assert named in str(error.value)
    assert "a recurrent encoder may only grow into a cascade" in str(error.value)
    assert "\n" not in str(error.value)


def kept_as(trained, tmp_path, **model):
    """A copy of the tiny run whose kept model says it has `model`'s settings (only its
    configuration: enough for `check_init_from`, which loads no weight)."""
    run = tmp_path / "base"
    shutil.copytree(trained, run)
    path = run / "model" / "config.json"
    config = json.loads(path.read_text())
    config["model"].update(model)
    path.write_text(json.dumps(config))
    return run


@pytest.mark.parametrize(("override", "named"), [
    # The self-attention decoder's blocks read these too: they stay RUN's.
    (GROW + ["model.heads=4", "model.decoder=self-attention"],
     "model.heads is 4 here but 2 in"),
    (GROW + ["model.norm=post", "model.heads=2", "model.decoder=self-attention"],
     "model.norm is 'post' here but 'pre' in"),
])
def test_a_self_attention_decoder_keeps_run_s_block_keys(trained, tmp_path, override, named):
    base = kept_as(trained, tmp_path, decoder="self-attention", heads=2)
    with pytest.raises(AttncliError, match="^--init-from: ") as error:
        check_init_from(base, load_run_config(TINY, override))
    assert named in str(error.value)
    grown = load_run_config(TINY, GROW + ["model.decoder=self-attention",
                                          "model.encoder_blocks=3"])
    assert check_init_from(base, grown).model_dir == (base / "model").resolve()


@pytest.mark.parametrize(("override", "named"), [
    (GROW + ["model.encoder_blocks=3"], "model.encoder_blocks is 3 here but 2 in"),
    (GROW + ["model.encoder_norm_gain=0.5"], "model.encoder_norm_gain is 0.5 here but 1.0 in"),
    (["model.heads=2"], "model.encoder is 'rnn' here but 'cascade' in"),
])
def test_a_cascade_keeps_its_blocks(trained, tmp_path, override, named):
    base = kept_as(trained, tmp_path, encoder="cascade", encoder_blocks=2, heads=2)
    with pytest.raises(AttncliError, match="^--init-from: ") as error:
        check_init_from(base, load_run_config(TINY, override))
    assert named in str(error.value)


def test_the_grown_model_starts_from_run_s_weights_and_new_blocks(trained, tmp_path):
    from attncli.model.encoder import Encoder
    from attncli.search.loading import load_model

    parts, recorder = build_finetuning(trained, tmp_path / "grown", overrides=GROW)
    model, kept = parts.model, load_model(trained / "model").model
    assert model.config.encoder == "cascade" and kept.config.encoder == "rnn"
    theirs = {inner(variable): variable.numpy() for variable in kept.weights}
    ours = {inner(variable): variable.numpy() for variable in model.weights}
    # The annotations keep their 32 features: every weight RUN had is taken as it was.
    assert set(theirs) < set(ours)
    for path, value in theirs.items():
        np.testing.assert_array_equal(ours[path], value, err_msg=path)
    new = sorted({"/".join(path.split("/")[:2]) for path in set(ours) - set(theirs)})
    assert new == ["encoder/block_0", "encoder/block_1", "encoder/final_norm"]
    [said] = [m for m in recorder.messages if m.startswith("initialised from")]
    assert (f"{len(theirs)} of the {len(ours)} weights, its recurrent encoder grown into "
            "a cascade; fresh: encoder/block_0, encoder/block_1, encoder/final_norm") in said
    assert "optimizer starts fresh" in said

    # The cascade's recurrent layers compute what RUN's encoder computed.
    ids = np.array([[5, 9, 14, 2, 0, 0], [7, 3, 0, 0, 0, 0]], dtype="int32")
    recurrent, (final,), _ = Encoder.call(model.encoder, ids)
    expected, (expected_final,), _ = kept.encoder(ids)
    np.testing.assert_allclose(recurrent, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(final, expected_final, rtol=1e-6, atol=1e-6)
    # The blocks are new: their output is not the recurrent layers'.
    outputs, _, _ = model.encoder(ids)
    assert not np.allclose(outputs, recurrent, atol=1e-3)
    record = json.loads((tmp_path / "grown" / "init_from.json").read_text())
    assert record["run"] == str(trained.resolve())


def refused_in_one_line(result):
    """The error line of a refused `attncli` command (`one_line_error`), which is also
    the last line on stderr, after the progress lines."""
    line = one_line_error(result)
    assert result.stderr.strip().splitlines()[-1] == line, result.stderr
    return line


def test_a_grown_run_killed_before_its_first_checkpoint_grows_again(trained, tmp_path):
    base = tmp_path / "base"
    shutil.copytree(trained, base)
    # The run is made, then nothing is trained.
    build_finetuning(base, tmp_path / "grown", overrides=GROW)[0].run.unlock()
    parts, recorder = build_finetuning(base, tmp_path / "grown", resume=True)
    assert any("its recurrent encoder grown into a cascade" in m for m in recorder.messages)
    assert parts.model.config.encoder == "cascade"
    parts.run.unlock()

    # RUN's kept model damaged meanwhile: named in one line, exit 2.
    config_file = base / "model" / "config.json"
    saved = config_file.read_bytes()
    config_file.write_text("{", encoding="utf-8")
    refused = in_process("train", "--resume", "--run-dir", tmp_path / "grown")
    line = refused_in_one_line(refused)
    assert f"--init-from: cannot read {config_file.resolve()}" in line
    assert line.endswith("put RUN's kept model back, or start again with --overwrite")
    config_file.write_bytes(saved)

    # RUN trained again meanwhile: its weights are no longer those the run started from.
    weights = base / "model" / "model.weights.h5"
    weights.write_bytes(weights.read_bytes()[:-1] + b"x")
    refused = in_process("train", "--resume", "--run-dir", tmp_path / "grown")
    assert refused_in_one_line(refused).endswith(
        f"{weights.resolve()} has changed since this run started from it (its SHA-256 is "
        "not the one in init_from.json): put those weights back, or start again with "
        "--overwrite"
    )


@pytest.mark.parametrize(("decoder", "reads_annotations"), [
    ({"decoder": "luong", "score": "general"},
     {"decoder/attention/W_a", "decoder/W_c/kernel"}),
    ({"decoder": "bahdanau", "score": "additive"},
     {"decoder/attention/W_k", "decoder/gru_cell/kernel"}),
])
def test_weights_whose_shape_changes_start_fresh(tmp_path, decoder, reads_annotations):
    """Concatenated directions (64 features) grown into blocks of 32: the projection is
    new, and so are the decoder's weights that read the annotations."""
    import keras

    from attncli.config.model import ModelSettings
    from attncli.model.encoder_decoder import Seq2Seq
    from attncli.model.saving import load_matching_weights

    settings = ModelSettings(embedding_dim=32, units=32, merge_mode="concat", **decoder)
    recurrent_config = settings.sized(50, 60)
    keras.utils.set_random_seed(1)
    source = Seq2Seq(recurrent_config)
    path = tmp_path / "model.weights.h5"
    source.save_weights(str(path))
    keras.utils.set_random_seed(2)
    grown = Seq2Seq(dataclasses.replace(settings, encoder="cascade", heads=2).sized(50, 60))
    before = {inner(variable): variable.numpy() for variable in grown.weights}

    fresh = load_matching_weights(grown, recurrent_config, path, "advice")

    theirs = {inner(variable): variable.numpy() for variable in source.weights}
    assert {p for p in fresh if p.startswith("decoder/")} == reads_annotations
    assert {"/".join(p.split("/")[:2]) for p in fresh if p.startswith("encoder/")} == {
        "encoder/projection", "encoder/block_0", "encoder/final_norm",
    }
    for variable in grown.weights:
        path_ = inner(variable)
        expected = before[path_] if path_ in fresh else theirs[path_]
        np.testing.assert_array_equal(variable.numpy(), expected, err_msg=path_)
    assert not any(path_.startswith(("encoder/layer", "encoder/embedding", "bridge"))
                   for path_ in fresh)


def test_damaged_weights_are_named(tmp_path):
    from attncli.config.model import ModelSettings
    from attncli.model.encoder_decoder import Seq2Seq
    from attncli.model.saving import ModelFileError, load_matching_weights

    path = tmp_path / "model.weights.h5"
    path.write_bytes(b"not an HDF5 file")
    settings = ModelSettings(embedding_dim=16, units=16)
    grown = Seq2Seq(dataclasses.replace(settings, encoder="cascade").sized(20, 20))
    with pytest.raises(ModelFileError,
                       match=f"^cannot read the weights {re.escape(str(path))} .*: advice$"):
        load_matching_weights(grown, settings.sized(20, 20), path, "advice")


@pytest.mark.slow
def test_attncli_trains_and_translates_a_grown_cascade(trained, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sets = [arg for override in GROW + ["training.epochs=1"] for arg in ("--set", override)]
    result = succeeds_here(in_process("train", TINY, *sets, "--run-dir", "grown",
                                      "--init-from", trained))
    assert "its recurrent encoder grown into a cascade" in result.stderr
    kept = json.loads((tmp_path / "grown" / "model" / "config.json").read_text())
    assert kept["model"]["encoder"] == "cascade" and kept["model"]["encoder_blocks"] == 2
    assert kept["metadata"]["init_from"] == str(trained.resolve())
    translated = succeeds_here(in_process("translate", "grown", "tom is here ."))
    assert translated.stdout.strip()
