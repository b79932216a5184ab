"""`inspect-weights` on models with self-attention: every attention, layer and head, and
one query's step record, checked against the model's own sublayer output."""

import numpy as np
import pytest
from typer.testing import CliRunner

from cli_errors import one_line_error
from spa_eng_parts import model_and_tokenizers

from attncli.cli.app import app
from attncli.config.search import SearchConfig
from attncli.model import saving
from attncli.search.inspection import inspect_sentence
from attncli.search.loading import LoadedModel

TRANSFORMER = dict(encoder="self-attention", decoder="self-attention", encoder_layers=2,
                   decoder_layers=2, heads=2, norm="pre", score="scaled_dot")
TEXT = "¿Dónde está el baño?"
runner = CliRunner()


@pytest.fixture(scope="module")
def translated():
    model, source_tokenizer, target_tokenizer = model_and_tokenizers(**TRANSFORMER)
    loaded = LoadedModel(model, source_tokenizer, target_tokenizer, False, {})
    translator = loaded.translator(SearchConfig(beam_size=3, n_best=1, max_length_offset=4))
    [translation] = translator.translate([TEXT])
    return loaded, translator, translation, translation.hypotheses[0]


def test_the_mean_cross_attention_of_the_last_layer_is_what_the_search_kept(translated):
    view = inspect_sentence(*translated[:3])
    shown = view.matrix("cross")
    np.testing.assert_allclose(shown.weights, translated[3].weights, rtol=1e-4, atol=1e-6)
    one_head = view.matrix("cross", 1, 2)
    np.testing.assert_array_equal(one_head.weights, view.attentions["cross"].layers[0][1])


def test_the_decoder_self_attention_is_causal_and_labelled_by_its_inputs(translated):
    shown = inspect_sentence(*translated[:3]).matrix("decoder", 2, 1)
    assert shown.columns[0] == "[START]" and shown.rows == list(translated[3].tokens)
    assert np.all(np.triu(shown.weights, k=1) == 0)
    np.testing.assert_allclose(shown.weights.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("attention, layer", [("encoder", 1), ("decoder", 2), ("cross", 1)])
def test_the_steps_of_the_heads_rebuild_the_attention_sublayer_output(translated, attention,
                                                                      layer):
    """Each head's step (its query, keys, values, softmax and sum), concatenated and
    multiplied by W_o, must give the attention layer's own output at that query."""
    view = inspect_sentence(*translated[:3])
    step = 2
    records = [view.step(attention, layer, head, step).record for head in (1, 2)]
    for record in records:
        scores = record.keys @ record.query / np.sqrt(len(record.query))
        np.testing.assert_allclose(record.scores, scores, rtol=1e-4, atol=1e-5)
        visible = record.mask
        expected = np.exp(scores - scores[visible].max()) * visible
        np.testing.assert_allclose(record.weights, expected / expected.sum(), rtol=1e-4,
                                   atol=1e-6)
    model = translated[0].model
    blocks = model.encoder.blocks if attention == "encoder" else model.decoder.blocks
    sublayer = (blocks[layer - 1].cross_attention if attention == "cross"
                else blocks[layer - 1].self_attention)
    # The query's own row attends to the keys it may see (a causal one: those up to it).
    inputs = record.key_input[:step] if attention == "decoder" else record.key_input
    output = sublayer([record.query_input[None, None].astype("float32"),
                       inputs[None].astype("float32")])
    heads = np.concatenate([record.context for record in records])
    rebuilt = heads @ np.asarray(sublayer.W_o) + np.asarray(sublayer.b_o)
    np.testing.assert_allclose(rebuilt, np.asarray(output)[0, 0], rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def model_directory(tmp_path_factory):
    model, source_tokenizer, target_tokenizer = model_and_tokenizers(**TRANSFORMER)
    directory = tmp_path_factory.mktemp("inspect") / "model"
    saving.save_model(directory, model, source_tokenizer, target_tokenizer)
    return directory


def inspect(*args):
    return runner.invoke(app, ["inspect-weights", *map(str, args)], prog_name="attncli",
                         env={"COLUMNS": "200"})


def test_the_command_shows_one_head_and_walks_a_query(model_directory, tmp_path):
    picture = tmp_path / "decoder.png"
    result = inspect(model_directory, "--text", TEXT, "--attention", "decoder", "--layer", 1,
                     "--head", 2, "--step", 2, "--png", picture)
    assert result.exit_code == 0, result.output
    assert "decoder self-attention weights (layer 1 of 2, head 2 of 2)" in result.stdout
    assert "2. query q = x W_q + b_q" in result.stdout and "7. sum" in result.stdout
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, message", [
    (["--layer", 3], "--layer 3 is out of range: the cross attention has 2 layers"),
    (["--head", 5], "--head 5 is out of range"),
    (["--attention", "both"], "choose cross, encoder, decoder or alignment"),
    (["--step", 99, "--attention", "encoder"], "--step 99 is out of range"),
])
def test_bad_choices_are_one_line_errors(model_directory, args, message):
    assert message in one_line_error(inspect(model_directory, "--text", TEXT, *args))


def test_an_rnn_model_has_no_self_attention_to_show(tmp_path):
    model, source_tokenizer, target_tokenizer = model_and_tokenizers()
    saving.save_model(tmp_path / "rnn", model, source_tokenizer, target_tokenizer)
    error = one_line_error(inspect(tmp_path / "rnn", "--text", TEXT, "--attention", "encoder"))
    assert "this model's encoder is recurrent" in error
