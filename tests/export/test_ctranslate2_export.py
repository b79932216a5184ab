"""`attncli export --format ctranslate2` and `attncli translate --engine ctranslate2`.

The conversion is checked where it can fail: every setting of a Transformer (pre/post norm,
sinusoidal/learned positions, tied embeddings, ReLU/GELU, heads) on random weights, by the
log probabilities CTranslate2 gives a target against the model's own (teacher-forced,
[PAD] and [START] masked); the tokenizer files read without TensorFlow against
tensorflow-text on real sentences at every level; then a tiny Transformer trained here,
exported, and translated by both engines in whole processes.
"""

import gzip
import json
import sys
import textwrap
from importlib import resources

import numpy as np
import process_watch
import pytest
from attncli_runs import ENV, attncli, succeeds, trained  # noqa: F401 (a fixture)
from cli_errors import one_line_error
from ctranslate2_runs import exported, validation_sentences  # noqa: F401 (a fixture)

ctranslate2 = pytest.importorskip("ctranslate2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from attncli.config.model import ModelConfig  # noqa: E402
from attncli.data.tokenization import Tokenizer  # noqa: E402
from attncli.data.vocabulary import PAD, RESERVED_TOKENS, START  # noqa: E402
from attncli.export.convertible import ctranslate2_refusal  # noqa: E402
from attncli.export.ctranslate2_model import TransformerConverter  # noqa: E402
from attncli.export.plain_tokenizer import PlainTokenizer  # noqa: E402
from attncli.model.encoder_decoder import Seq2Seq  # noqa: E402


def spa_eng_pairs(count, seed=0):
    """`count` (English, Spanish) pairs of the bundled corpus, drawn at random."""
    path = resources.files("attncli") / "resources" / "spa-eng.txt.gz"
    with gzip.open(str(path), "rt", encoding="utf-8") as lines:
        pairs = [line.rstrip("\n").split("\t")[:2] for line in lines]
    rng = np.random.default_rng(seed)
    return [pairs[index] for index in rng.choice(len(pairs), count, replace=False)]


# ----------------------------------------------------------------------------------------
# The model: CTranslate2's log probabilities of a target are the model's own.


def random_transformer(**settings):
    """A `Seq2Seq` Transformer with every weight drawn at random (so a gain, a bias or a
    norm mapped to the wrong place shows), and its vocabularies."""
    fields = dict(encoder="self-attention", decoder="self-attention", score="scaled_dot",
                  embedding_dim=16,
                  heads=4, feed_forward_dim=24, encoder_layers=2, decoder_layers=2,
                  source_vocab_size=23, target_vocab_size=23)
    fields.update(settings)
    model = Seq2Seq(ModelConfig(**fields))
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.5, weight.shape).astype("float32"))
    source = list(RESERVED_TOKENS) + [f"s{i}" for i in range(fields["source_vocab_size"] - 4)]
    target = list(RESERVED_TOKENS) + [f"t{i}" for i in range(fields["target_vocab_size"] - 4)]
    return model, source, target


def model_log_probs(model, source_ids, target_ids):
    """log p(y_t | y_<t, x) of each target id and of [END] after them, from the model's
    teacher-forced logits with [PAD] and [START] masked (as the search masks them)."""
    logits = model((np.array([source_ids]), np.array([[START] + target_ids])),
                   training=False)[0].numpy().astype(np.float64)
    logits[:, [PAD, START]] = -np.inf
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                                keepdims=True)) - logits.max(-1, keepdims=True)
    return log_probs[np.arange(len(target_ids) + 1), target_ids + [3]]


@pytest.mark.parametrize("settings", [
    {},
    {"norm": "post"},
    {"position_encoding": "learned", "max_positions": 4},  # positions past 3 share row 3
    {"tie_embeddings": "target"},
    {"tie_embeddings": "all"},
    {"activation": "gelu", "heads": 2},
    {"heads": 1, "encoder_layers": 1, "decoder_layers": 3},
])
def test_ctranslate2_gives_the_model_s_log_probabilities(settings, tmp_path):
    model, source, target = random_transformer(**settings)
    TransformerConverter(model, source, target, 16, 16).convert(str(tmp_path / "ct2"))
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), intra_threads=1)
    # The epsilon barely moves these log probabilities: it is compared itself.
    config = json.loads((tmp_path / "ct2" / "config.json").read_text("utf-8"))
    epsilons = {layer.epsilon for layer in model._flatten_layers()
                if isinstance(layer, keras.layers.LayerNormalization)}
    assert epsilons == {config["layer_norm_epsilon"]}
    rng = np.random.default_rng(1)
    for length in (1, 3, 9):
        source_ids = rng.integers(4, len(source), length).tolist()
        target_ids = rng.integers(4, len(target), length + 2).tolist()
        [scored] = translator.score_batch([[source[i] for i in source_ids]],
                                          [[target[i] for i in target_ids]])
        np.testing.assert_allclose(scored.log_probs,
                                   model_log_probs(model, source_ids, target_ids),
                                   atol=1e-4, rtol=1e-4)


def test_only_a_scaled_dot_transformer_converts():
    base = dict(encoder="self-attention", decoder="self-attention", score="scaled_dot",
                embedding_dim=16, source_vocab_size=9, target_vocab_size=9)
    assert ctranslate2_refusal(ModelConfig(**base)) is None
    assert "not a Transformer" in ctranslate2_refusal(ModelConfig(**base | {"encoder": "rnn"}))
    assert "not a Transformer" in ctranslate2_refusal(
        ModelConfig(**base | {"decoder": "luong", "units": 16}))
    assert "scaled dot" in ctranslate2_refusal(ModelConfig(**base | {"score": "general"}))


def test_the_check_names_what_differs():
    from attncli.export.ctranslate2_export import difference

    wanted = [[["hola", "."], [[["hello", ".", "[END]"], "hello.", -0.5]]]]
    assert difference(["Hola."], "beam", wanted, wanted) is None
    other_tokens = [[["hola", "."], [[["hi", ".", "[END]"], "hi.", -0.5]]]]
    assert "translates 'Hola.' as 'hi . [END]'" in difference(["Hola."], "beam", other_tokens,
                                                               wanted)
    other_source = [[["hola"], [[["hello", ".", "[END]"], "hello.", -0.5]]]]
    assert "tokenizer reads" in difference(["Hola."], "beam", other_source, wanted)
    other_score = [[["hola", "."], [[["hello", ".", "[END]"], "hello.", -0.5002]]]]
    assert "score" in difference(["Hola."], "greedy", other_score, wanted)


# ----------------------------------------------------------------------------------------
# The tokenizer files without TensorFlow: the same tokens and texts as tensorflow-text.

MIXED = ["  Hola,\u00a0 mundo\u200b! ", "Ｆｕｌｌ ｗｉｄｔｈ ＡＢＣ", "Straße ÉCOLE ﬁn", "他说：“你好。”",
         "don't pay $30 at 3:30, 'ok' \"hi .\"", "naïve café — déjà vu…", "", "   "]


def same_as_tensorflow(tokenizer, texts):
    plain = PlainTokenizer(tokenizer.get_config(), tokenizer.vocabulary.tokens,
                           tokenizer.sentencepiece_model)
    tokens = [[token.decode("utf-8") for token in row]
              for row in tokenizer.tokenize(tf.constant(texts)).to_list()]
    assert [plain.tokenize(text) for text in texts] == tokens
    detokenized = tokenizer.detokenize(tf.ragged.constant(tokens, dtype=tf.string)).numpy()
    assert [plain.detokenize(row) for row in tokens] == [t.decode("utf-8") for t in detokenized]


@pytest.mark.parametrize("settings", [
    dict(level="word", normalization="NFKD", lowercase=True, strip_accents=True,
         drop_pattern="[^ a-z.?!,¿]"),
    dict(level="word", normalization="NFC"),
    dict(level="word", normalization="NFKC", lowercase=True),
    dict(level="char", normalization="NFC", lowercase=True),
    dict(level="subword", normalization="NFC"),
    dict(level="sentencepiece", normalization="NFC"),
    dict(level="sentencepiece", normalization="NFC", sentencepiece_type="bpe"),
])
def test_the_tokenizer_files_read_without_tensorflow(settings):
    pairs = spa_eng_pairs(3000)
    learn = [spanish for _, spanish in pairs[:2000]] + [english for english, _ in pairs[:2000]]
    texts = [spanish for _, spanish in pairs[2000:]] + [english for english, _ in pairs[2000:]]
    size = 600 if settings["level"] in ("subword", "sentencepiece") else 2000
    tokenizer = Tokenizer(**settings)
    tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(learn, max_size=size))
    same_as_tensorflow(tokenizer, texts + MIXED)


@pytest.mark.parametrize("joiner", [None, "@@", "\u2581"])
def test_pretokenized_pieces_join_as_tensorflow_joins_them(joiner):
    texts = ["Mach@@ en Sie das", "\u2581Die \u2581Kat ze \u2581schläft", "a@@ b@@", " x  y "]
    tokenizer = Tokenizer("pretokenized", joiner=joiner)
    tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(texts))
    same_as_tensorflow(tokenizer, texts)


def test_the_tokenizer_files_of_hansards_read_without_tensorflow():
    from shared_data import shared_data

    folder = shared_data("hansards-en-fr")
    texts = (folder / "test.fr").read_text("utf-8").splitlines() + (
        folder / "test.en").read_text("utf-8").splitlines()
    for level in ("word", "subword"):
        tokenizer = Tokenizer(level, normalization="NFC", lowercase=True)
        tokenizer = tokenizer.with_vocabulary(tokenizer.build_vocabulary(texts, max_size=800))
        same_as_tensorflow(tokenizer, texts)


def engine_process(export, *arguments, stdin):
    """`attncli translate EXPORT --engine ctranslate2 ARGUMENTS` in a Python that prints,
    after the command's output, `HEAVY [...]`: the heavy modules imported by then."""
    code = textwrap.dedent(f"""
        import runpy, sys
        sys.argv = ["attncli", "translate", {str(export)!r}, "--engine", "ctranslate2",
                    *{[str(argument) for argument in arguments]!r}]
        try:
            runpy.run_module("attncli", run_name="__main__")
        except SystemExit as exit:
            assert not exit.code, exit.code
        print("HEAVY", sorted(name for name in ("tensorflow", "keras", "tensorflow_text")
                              if name in sys.modules))
    """)
    result = process_watch.run([sys.executable, "-c", code], input=stdin, env=ENV)
    assert result.returncode == 0, result.stderr
    *lines, heavy = result.stdout.splitlines()
    return lines, heavy


@pytest.mark.slow
def test_the_export_holds_a_model_its_tokenizers_and_a_readme(exported):
    run, export = exported
    stderr = (export.parent / "export.stderr").read_text("utf-8")
    assert "checked in a fresh Python without TensorFlow" in stderr
    for name in ("model.bin", "config.json", "source.tokenizer.json", "source.vocab.txt",
                 "target.tokenizer.json", "target.vocab.txt", "attncli-ctranslate2.json",
                 "README.md"):
        assert (export / name).is_file(), name
    config = json.loads((export / "config.json").read_text("utf-8"))
    assert config["layer_norm_epsilon"] == 1e-6
    assert (config["bos_token"], config["eos_token"], config["unk_token"],
            config["decoder_start_token"]) == ("[START]", "[END]", "[UNK]", "[START]")
    readme = (export / "README.md").read_text("utf-8")
    assert "--engine ctranslate2" in readme and "ctranslate2.Translator" in readme


@pytest.mark.slow
@pytest.mark.parametrize("beam", [1, 5])
def test_the_ctranslate2_engine_translates_as_attncli_translate(exported, beam):
    from attncli.search.loading import load_model

    run, export = exported
    sentences = validation_sentences(run)
    loaded = load_model(run / "model")
    translator = loaded.translator(loaded.search.adjusted(beam_size=beam, n_best=beam),
                                   attention_weights=False)
    wanted = translator.translate(sentences)
    lines, heavy = engine_process(export, "--format", "json", "--beam", beam,
                                  "--n-best", beam, stdin="\n".join(sentences) + "\n")
    assert heavy == "HEAVY []"
    found = [json.loads(line) for line in lines]
    assert len(found) == len(sentences)
    for line, translation in zip(found, wanted):
        assert line["source_tokens"] == translation.source_tokens
        assert [h["tokens"] for h in line["hypotheses"]][:1] == [
            translation.hypotheses[0].tokens]
        for hypothesis, want in zip(line["hypotheses"], translation.hypotheses):
            if hypothesis["tokens"] == want.tokens:
                assert hypothesis["text"] == want.text
                assert abs(hypothesis["score"] - want.score) < 1e-4


@pytest.mark.slow
def test_text_output_is_attncli_translate_s(exported):
    run, export = exported
    sentences = validation_sentences(run)[:8] + ["", "¿Qué hora es?"]
    stdin = "\n".join(sentences) + "\n"
    wanted = succeeds(attncli("translate", run, cwd=run.parent, stdin=stdin))
    lines, heavy = engine_process(export, stdin=stdin)
    assert heavy == "HEAVY []"
    assert lines == wanted.stdout.splitlines()


@pytest.mark.slow
def test_a_recurrent_run_is_refused_in_one_line(trained, tmp_path):
    line = one_line_error(attncli("export", trained, tmp_path / "out", "--format",
                                  "ctranslate2", cwd=tmp_path))
    assert "not a Transformer" in line and "recurrent" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_engine_mistakes_are_one_line(exported, tmp_path):
    run, export = exported
    line = one_line_error(attncli("translate", export, "hola", cwd=tmp_path))
    assert "--engine ctranslate2" in line
    line = one_line_error(attncli("translate", run, "hola", "--engine", "ctranslate2",
                                  cwd=tmp_path))
    assert "--format ctranslate2" in line
    line = one_line_error(attncli("translate", export, "hola", "--engine", "ctranslate2",
                                  "--alignments", cwd=tmp_path))
    assert "--alignments" in line
    line = one_line_error(attncli("export", run, tmp_path / "out", "--format", "onnx",
                                  cwd=tmp_path))
    assert "ctranslate2" in line


@pytest.mark.slow
def test_an_export_that_fails_its_check_is_not_written(exported, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from attncli.cli.app import app
    from attncli.export import ctranslate2_export

    run, _ = exported
    honest = ctranslate2_export.expected

    def mistaken(translator, samples):
        found = honest(translator, samples)
        found[0][1][0][0] = found[0][1][0][0][1:]  # attncli's first token left out
        return found

    monkeypatch.setattr(ctranslate2_export, "expected", mistaken)
    result = CliRunner().invoke(app, ["export", str(run), str(tmp_path / "out"), "--format",
                                      "ctranslate2"])
    assert "failed its check" in one_line_error(result)
    assert not (tmp_path / "out").exists()
