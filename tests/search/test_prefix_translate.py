"""`--prefix`, `--prefix-file` and `--sampling` from strings to printed lines: a seeded
model saved as a run would save it, translated by `Translator` and `attncli translate`."""

import numpy as np
import pytest
import tensorflow as tf
from cli_errors import one_line_error
from spa_eng_parts import SENTENCES, model_and_tokenizers
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.config.search import Decoding, Sampling, SearchConfig
from attncli.data.vocabulary import END
from attncli.model.saving import save_model
from attncli.search.translation import PrefixError, Translator

SEARCH = SearchConfig(beam_size=3, n_best=2, max_length_ratio=1.0, max_length_offset=4)


@pytest.fixture(scope="module")
def parts():
    model, source_tokenizer, target_tokenizer = model_and_tokenizers()
    # Untrained, the model would never end a sentence: more weight on end-of-sentence.
    bias = model.decoder.output_layer.bias
    bias.assign(bias.numpy() + 0.5 * (np.arange(bias.shape[0]) == END))
    return model, source_tokenizer, target_tokenizer


@pytest.fixture(scope="module")
def model_directory(parts, tmp_path_factory):
    directory = tmp_path_factory.mktemp("prefix") / "model"
    save_model(directory, *parts,
               metadata={"decoding": {"beam_size": 3, "max_length_ratio": 1.0,
                                      "max_length_offset": 4}})
    return directory


def target_tokens(tokenizer, text):
    return [token.decode("utf-8") for token in tokenizer.tokenize(tf.constant([text]))[0].numpy()]


@pytest.mark.parametrize("sampling", [None, Sampling("topk", top_k=5, samples=2)])
def test_each_translation_begins_with_its_prefix_tokens_and_text(parts, sampling):
    _, _, target_tokenizer = parts
    search = SearchConfig(max_length_ratio=1.0, max_length_offset=4) if sampling else SEARCH
    translator = Translator(*parts, Decoding(search, sampling))
    prefixes = ["Tom is", "", "We", "it is very"]
    results = translator.translate(SENTENCES, prefixes=prefixes)
    for prefix, result in zip(prefixes, results):
        forced = target_tokens(target_tokenizer, prefix)
        assert len(result.hypotheses) == 2
        for hypothesis in result.hypotheses:
            assert hypothesis.tokens[: len(forced)] == forced
            if forced:
                assert hypothesis.text.startswith(translator.detokenize(forced))


def test_prefixes_and_samples_do_not_depend_on_the_batch(parts):
    translator = Translator(*parts, Decoding(
        SearchConfig(max_length_ratio=1.0, max_length_offset=4),
        Sampling("random", temperature=1.5, samples=2)))
    texts = SENTENCES + ["Tom.", "Me gusta mucho leer libros en la biblioteca."]
    prefixes = ["", "the", "", "it", "tom", ""]
    seeds = [3] * len(texts)
    whole = translator.translate(texts, prefixes=prefixes, seeds=seeds)
    pieces = translator.translate(texts[::-1], batch_size=2, prefixes=prefixes[::-1],
                                  seeds=seeds)[::-1]
    for a, b in zip(whole, pieces):
        assert [h.tokens for h in a.hypotheses] == [h.tokens for h in b.hypotheses]
    other_seed = translator.translate(texts, prefixes=prefixes, seeds=[4] * len(texts))
    assert [r.hypotheses[0].tokens for r in other_seed] != [r.hypotheses[0].tokens
                                                           for r in whole]
    assert translator.translate_graph.experimental_get_tracing_count() == 1



def test_a_translator_gives_every_text_its_decodings_prefix_and_seed(parts):
    search = SearchConfig(max_length_ratio=1.0, max_length_offset=4)
    drawing = Sampling("random", temperature=1.5, samples=2)
    asked = Translator(*parts, Decoding(search, drawing, prefix="the", seed=3))
    given = Translator(*parts, Decoding(search, drawing))
    found = asked.translate(SENTENCES)
    expected = given.translate(SENTENCES, prefixes=["the"] * len(SENTENCES),
                               seeds=[3] * len(SENTENCES))
    assert [[h.tokens for h in r.hypotheses] for r in found] == [
        [h.tokens for h in r.hypotheses] for r in expected]
    assert all(h.tokens[0] == "the" for r in found for h in r.hypotheses)

@pytest.mark.parametrize("prefix, message", [
    ("qwxz zzkq", "has no token of the model's target vocabulary"),
    ("[UNK]", "has no token of the model's target vocabulary"),
    ("tom " * 9, "has 9 tokens and the translation of 'Tom no vino.' at most 8"),
])
def test_a_prefix_that_cannot_be_forced_is_refused(parts, prefix, message):
    translator = Translator(*parts, SEARCH)
    with pytest.raises(PrefixError, match=message.replace("[", r"\[").replace(".", r"\.")) as error:
        translator.translate(["Hola.", "Tom no vino."], prefixes=["", prefix])
    assert error.value.index == 1


def invoke(*arguments, input=None):
    return CliRunner().invoke(app, ["translate", *map(str, arguments)], input=input)


def test_translate_prefix_and_prefix_file(model_directory, tmp_path, parts):
    given = invoke(model_directory, *SENTENCES[:2], "--prefix", "Tom is", "--format", "tsv",
                   "--n-best", "2")
    assert given.exit_code == 0, given.stderr
    rows = [line.split("\t") for line in given.stdout.splitlines()]
    # The prefix as the model writes it: this target side is lower-cased.
    assert len(rows) == 4 and all(row[3].startswith("tom is") for row in rows)
    prefixes = tmp_path / "prefixes.txt"
    inputs = tmp_path / "input.txt"
    inputs.write_text("\n".join(SENTENCES[:2] + ["", SENTENCES[2]]) + "\n", "utf-8")
    # Line 3 is empty: not translated, its prefix line is read and ignored.
    prefixes.write_text("Tom is\n\nignored\nwe\n", "utf-8")
    per_line = invoke(model_directory, "--input", inputs, "--prefix-file", prefixes)
    assert per_line.exit_code == 0, per_line.stderr
    lines = per_line.stdout.splitlines()
    plain = invoke(model_directory, SENTENCES[1]).stdout.splitlines()
    assert lines[0].startswith("tom is") and lines[1] == plain[0] and lines[2] == ""
    assert lines[3].startswith("we")


@pytest.mark.parametrize("arguments, message", [
    (["--prefix", "  "], "--prefix '  ' is blank"),
    (["--prefix", "qwxz"], "--prefix: the prefix 'qwxz' has no token of the model's target"),
    (["--prefix", "tom " * 9], "--prefix: the prefix 'tom tom tom tom tom tom tom tom tom ' "
                              "has 9 tokens"),
    (["--prefix", "a", "--prefix-file", "PREFIXES"], "not both"),
    (["--prefix-file", "SHORT"], "--prefix-file SHORT has 1 lines for 2 inputs"),
    (["--sampling", "top5"], "--sampling: sampling is random, topk:K (K an integer >= 1) or "
                             "topp:P (P in (0, 1]). Received: top5"),
    (["--sampling", "topp:1.5"], "--sampling: topp:P needs a number P in (0, 1]"),
    (["--sampling", "random", "--beam", "3"], "--beam 3 and --sampling: sampling draws each "
                                               "translation on its own"),
    (["--sampling", "random", "--n-best", "101"], "--n-best must be in [1, 100]"),
    (["--sampling", "random", "--temperature", "0"], "temperature must be a number in [0.001, 100]"),
    (["--sampling", "random", "--seed", "-1"], "--seed must be in [0, 2**63 - 1]"),
    (["--temperature", "0.5"], "--temperature applies to sampling"),
    (["--seed", "3"], "--seed applies to sampling"),
])
def test_options_that_do_not_fit_are_one_line(model_directory, tmp_path, arguments, message):
    files = {"PREFIXES": tmp_path / "p.txt", "SHORT": tmp_path / "short.txt"}
    for path in files.values():
        path.write_text("tom\n", "utf-8")
    arguments = [str(files[a]) if a in files else a for a in arguments]
    message = message.replace("SHORT", str(files["SHORT"]))
    result = invoke(model_directory, "Hola.", "Tom no vino.", *arguments)
    assert message in one_line_error(result)
    assert result.stdout == ""


def test_translate_sampling_is_reproducible_and_draws_n_per_line(model_directory):
    arguments = [model_directory, *SENTENCES, "--sampling", "topp:0.9", "--temperature", "1.3",
                 "--n-best", "3", "--format", "tsv"]
    first = invoke(*arguments, "--seed", "5")
    again = invoke(*arguments, "--seed", "5", "--batch-size", "1")
    other = invoke(*arguments, "--seed", "6")
    assert first.exit_code == 0, first.stderr
    assert first.stdout == again.stdout != other.stdout
    rows = [line.split("\t") for line in first.stdout.splitlines()]
    assert [row[:2] for row in rows] == [[str(n), str(r)] for n in range(1, 5) for r in (1, 2, 3)]
    for n in range(4):
        scores = [float(row[2]) for row in rows[3 * n : 3 * n + 3]]
        assert scores == sorted(scores, reverse=True)


def test_a_prefix_and_sampling_with_an_ensemble(model_directory):
    # The members share one target vocabulary (load_ensemble refuses any other).
    result = invoke(model_directory, *SENTENCES[:2], "--ensemble", model_directory,
                    "--prefix", "tom is", "--sampling", "topk:3", "--seed", "2")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("tom is") for line in lines)
