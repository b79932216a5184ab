"""`inspect-weights --reference/--words/--gold`: the attention over a given translation
(forced decoding), the words view (a row word the mean of its pieces' rows, a column word
the sum of its pieces' columns) and the links and gold links marked on the cells.

Small untrained models of `spa_eng_parts` (a recurrent Luong model and a Transformer),
saved and inspected through the command in this process; the figures are checked
against `force` run on its own, and the folding against sums written out by hand.
"""

import io
import re

import numpy as np
import pytest
import tensorflow as tf
from rich.console import Console
from spa_eng_parts import model_and_tokenizers
from typer.testing import CliRunner

from cli_errors import one_line_error

from attncli.cli.app import app
from attncli.cli.heatmap import heatmap_figure, heatmap_table
from attncli.config.search import SearchConfig
from attncli.model import saving
from attncli.search.alignments import Word
from attncli.search.forced import force, perplexity
from attncli.search.inspection import inspect_reference, inspect_sentence, sentence_words
from attncli.search.sentence_view import AttentionMatrices, SentenceView
from attncli.search.loading import LoadedModel, load_model

TEXT = "¿Dónde está el baño?"
REFERENCE = "Where is the bathroom?"
MODELS = {
    "transformer": dict(encoder="self-attention", decoder="self-attention",
                        encoder_layers=2, decoder_layers=2, heads=2, norm="pre",
                        score="scaled_dot"),
    "luong": dict(decoder="luong", score="general"),
}
runner = CliRunner()


@pytest.fixture(scope="module", params=sorted(MODELS))
def saved(request, tmp_path_factory):
    """`(model directory, LoadedModel, Translator)` of a small untrained model."""
    model, source_tokenizer, target_tokenizer = model_and_tokenizers(**MODELS[request.param])
    directory = tmp_path_factory.mktemp(request.param) / "model"
    saving.save_model(directory, model, source_tokenizer, target_tokenizer)
    loaded = load_model(directory)
    search = SearchConfig(beam_size=1, n_best=1, max_length_offset=4)
    return directory, loaded, loaded.translator(search)


def inspect(*args):
    return runner.invoke(app, ["inspect-weights", *map(str, args)], prog_name="attncli",
                         env={"COLUMNS": "250"})


def table(output):
    """The first heatmap table printed: `(column labels, row labels, cells)`, each cell
    the text between the bars."""
    lines = output.splitlines()
    header = next(line for line in lines if line.startswith("┃"))
    columns = [cell.strip() for cell in header.split("┃")[2:-1]]
    rows, cells = [], []
    start = lines.index(header)
    for line in lines[start + 2:]:
        if not line.startswith("│"):
            break
        parts = line.split("│")[1:-1]
        rows.append(parts[0].strip())
        cells.append([cell.strip() for cell in parts[1:]])
    return columns, rows, cells


def numbers(cells):
    return np.array([[float(re.match(r"[-\d.]+", cell).group()) for cell in row]
                     for row in cells])


def test_the_table_is_the_forced_attention_and_the_score_is_printed(saved):
    directory, loaded, translator = saved
    [forced] = force(translator, [TEXT], [REFERENCE])
    result = inspect(directory, "--text", TEXT, "--reference", REFERENCE, "--decimals", 6)
    assert result.exit_code == 0, result.output
    columns, rows, cells = table(result.stdout)
    assert rows == forced.tokens and columns == forced.source_tokens
    np.testing.assert_allclose(numbers(cells), forced.weights, atol=1.5e-6)
    # The token view is the weights alone: links are marked in the words view.
    assert not any("+" in cell for row in cells for cell in row)
    assert "a link" not in result.stdout
    assert f"{TEXT}  →  {REFERENCE}" in result.stdout
    assert (f"reference score {forced.score:.3f} (log P / lp, the search's score), log P "
            f"{forced.log_prob:.3f}, perplexity {perplexity(forced):.3f} per token"
            in result.stdout)


def test_the_attention_alone_is_the_attention_forced_with_log_probs(saved):
    _, _, translator = saved
    sources, references = [TEXT, "Hace frío."], [REFERENCE, "It is cold today, very cold."]
    full = force(translator, sources, references)
    alone = force(translator, sources, references, log_probs=False)
    for with_scores, without in zip(full, alone):
        assert without.log_probs is None and without.score is None
        assert without.tokens == with_scores.tokens
        assert list(without.attentions) == list(with_scores.attentions)
        for name, layers in with_scores.attentions.items():
            for mine, theirs in zip(without.attentions[name], layers):
                np.testing.assert_array_equal(mine, theirs)
    # The log probs are those of the model's own logits, run eagerly, normalised over
    # the tokens search may emit (not [PAD], not [START]).
    vocabulary = translator.target_tokenizer.vocabulary
    _, source_ids = translator.source_ids(tf.constant([TEXT]))
    target_in = [vocabulary.id_of(token) for token in ["[START]", *full[0].tokens[:-1]]]
    target_out = [vocabulary.id_of(token) for token in full[0].tokens]
    logits = translator.model((source_ids, tf.constant([target_in])), training=False)
    logits = np.asarray(logits, "float64")[0]
    logits[:, [vocabulary.id_of("[PAD]"), vocabulary.id_of("[START]")]] = -np.inf
    top = logits.max(axis=1, keepdims=True)
    log_softmax = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(full[0].log_probs,
                               log_softmax[np.arange(len(target_out)), target_out], atol=1e-5)


def test_a_model_forced_once_is_not_kept_alive_by_its_compiled_pass(saved):
    import gc
    import weakref

    directory, _, _ = saved

    def force_a_fresh_model():
        translator = load_model(directory).translator()
        for log_probs in (True, False):
            force(translator, [TEXT], [REFERENCE], log_probs=log_probs)
        return weakref.ref(translator.model)

    model = force_a_fresh_model()
    gc.collect()
    assert model() is None


def test_a_reference_equal_to_the_models_output_gives_its_attention(saved):
    _, loaded, translator = saved
    [translation] = translator.translate([TEXT])
    own = inspect_sentence(loaded, translator, translation)
    given = inspect_reference(loaded, translator, TEXT, translation.hypotheses[0].text)
    # An untrained model stops at the longest length, where a reference ends with
    # [END]: the rows of the tokens both have are the same.
    emitted = len(own.tokens)
    assert given.tokens[:emitted] == own.tokens and given.tokens[-1] == "[END]"
    assert list(given.attentions) == list(own.attentions)
    for name, matrices in own.attentions.items():
        for mine, theirs in zip(given.attentions[name].layers, matrices.layers):
            rows, columns = (emitted, emitted) if name == "decoder" else (emitted, None)
            np.testing.assert_allclose(mine[:, :rows, :columns], theirs, atol=1e-5)
    # And a step walks the reference's tokens.
    last = len(given.tokens)
    np.testing.assert_allclose(given.step("cross", None, 1, last).record.weights,
                               given.attentions["cross"].layers[-1][0][last - 1], atol=1e-5)


def test_every_attention_layer_and_head_of_the_reference_is_shown(saved, tmp_path):
    directory, loaded, translator = saved
    [forced] = force(translator, [TEXT], [REFERENCE])
    choices = [("cross", 1, 1)]
    if loaded.model.self_attention_decoder:
        choices = [("cross", 1, 2), ("encoder", 2, 1), ("decoder", 1, 2)]
    for attention, layer, head in choices:
        result = inspect(directory, "--text", TEXT, "--reference", REFERENCE, "--attention",
                         attention, "--layer", layer, "--head", head, "--decimals", 6,
                         "--step", 2, "--png", tmp_path / f"{attention}.png")
        assert result.exit_code == 0, result.output
        np.testing.assert_allclose(numbers(table(result.stdout)[2]),
                                   forced.attentions[attention][layer - 1][head - 1],
                                   atol=1.5e-6)
        assert (tmp_path / f"{attention}.png").read_bytes()[:4] == b"\x89PNG"


# ---- words --------------------------------------------------------------------------


class Spaced:
    """A tokenizer that normalises nothing, for `sentence_words` on given tokens."""

    def __init__(self, level):
        self.level = level

    def normalize(self, texts):
        return tf.constant(texts)


def test_the_words_of_wordpiece_tokens_and_of_a_normalised_text():
    tokens = ["un", "##believ", "##able", "cat", "##s", "!", "[END]"]
    assert sentence_words(Spaced("subword"), "unbelievable cats!", tokens) == [
        Word("unbelievable", [0, 1, 2]), Word("cats!", [3, 4])]
    # The tutorial's normalisation drops "¡" and accents: the words still get their own
    # pieces (the text's characters alone would move "de" into "¡Salga").
    _, source_tokenizer, _ = model_and_tokenizers()
    text = "¡Salga de aquí!"
    tokens = [token.decode() for token in
              source_tokenizer.tokenize(tf.constant([text])).to_list()[0]]
    assert tokens == ["salga", "de", "aqui", "!"]
    assert sentence_words(source_tokenizer, text, tokens) == [
        Word("¡Salga", [0]), Word("de", [1]), Word("aquí!", [2])]


# Three target tokens (two words and [END]) over four source tokens (two words, a glued
# "!" of no letter, and [END]).
SOURCE = ["ta", "##ble", "rasa", "!"]
SOURCE_WORDS = [Word("table", [0, 1]), Word("rasa!", [2])]
OUTPUT = ["clean", "##ed", "slate", "[END]"]
TARGET_WORDS = [Word("cleaned", [0, 1]), Word("slate", [2])]
WEIGHTS = np.array([[0.10, 0.20, 0.30, 0.40],
                    [0.50, 0.10, 0.10, 0.30],
                    [0.05, 0.05, 0.70, 0.20],
                    [0.25, 0.25, 0.25, 0.25]])


def hand_view(heads=None):
    """A view of the words above over `heads` `(heads, 4, 4)` (default: WEIGHTS)."""
    heads = WEIGHTS[None] if heads is None else heads
    cross = AttentionMatrices("cross", OUTPUT, SOURCE, "output", "source", [heads])
    hypotheses = [{"text": "cleaned slate", "tokens": OUTPUT, "score": -1.0}]
    return SentenceView(None, "table rasa!", SOURCE, hypotheses, 0, {"cross": cross},
                        None, None, SOURCE_WORDS, TARGET_WORDS)


def test_a_word_row_is_the_mean_of_its_pieces_and_a_word_column_the_sum():
    shown = hand_view().matrix("cross", words=True)
    w = WEIGHTS
    expected = np.array([
        [((w[0, 0] + w[0, 1]) + (w[1, 0] + w[1, 1])) / 2, (w[0, 2] + w[1, 2]) / 2],
        [w[2, 0] + w[2, 1], w[2, 2]],
    ])  # [[0.45, 0.20], [0.10, 0.70]]
    np.testing.assert_allclose(shown.weights, expected, atol=1e-12)
    assert (shown.rows, shown.columns) == (["cleaned", "slate"], ["table", "rasa!"])
    assert "a row word is the mean of its pieces' rows" in shown.note
    # Each target word is linked to the source word of its largest word weight.
    assert shown.links == {(0, 0), (1, 1)}
    # In the token view each link covers the cells of both words' pieces.
    assert hand_view().matrix("cross").links == {(0, 0), (0, 1), (1, 0), (1, 1), (2, 2)}


def test_the_mean_of_the_heads_is_folded_as_each_head_is():
    heads = np.stack([WEIGHTS, WEIGHTS[:, ::-1]])
    view = hand_view(heads)
    np.testing.assert_allclose(
        view.matrix("cross", words=True).weights,
        (view.matrix("cross", head=1, words=True).weights
         + view.matrix("cross", head=2, words=True).weights) / 2, atol=1e-12)


def render(printable):
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(printable)
    return console.export_text()


def test_the_table_marks_links_and_gold_links_with_a_legend():
    text = render(heatmap_table(["a", "b"], ["x", "y"], np.array([[0.6, 0.4], [0.3, 0.7]]),
                                links={(0, 0), (1, 0)}, sure={(0, 0)}, possible={(1, 1)}))
    # Each kind of mark has its place, kept blank where the cell has none.
    assert "│ 0.60*+S │ 0.40   │" in text and "│ 0.30 +  │ 0.70* P│" in text  # the last: no pad
    assert ("* the row's largest weight; + a link (argmax of the word weights per target "
            "word); S a sure gold link; P a possible one") in " ".join(text.split())
    plain = render(heatmap_table(["a", "b"], ["x", "y"], np.eye(2)))
    assert "+" not in plain and "largest weight;" not in plain


def test_the_picture_marks_links_and_gold_links_with_a_legend():
    figure = heatmap_figure(["a", "b", "c"], ["x", "y"], np.full((2, 3), 1 / 3),
                            links={(0, 1), (1, 2)}, sure={(0, 1)}, possible={(1, 0)})
    axes = figure.axes[0]
    dots = [(line.get_xdata()[0], line.get_ydata()[0]) for line in axes.lines]
    assert sorted(dots) == pytest.approx([(1 - 0.3, 0 - 0.28), (2 - 0.3, 1 - 0.28)])
    squares = {(round(patch.get_x() + 0.32, 6), round(patch.get_y() + 0.32, 6),
                patch.get_linestyle() == "solid")
               for patch in axes.patches if patch.get_width() < 1}
    assert squares == {(1, 0, True), (0, 1, False)}  # (column, row, sure)
    [legend] = figure.legends
    assert [text.get_text() for text in legend.get_texts()] == [
        "the row's largest weight", "link (argmax per target word)", "sure gold link",
        "possible gold link"]


def test_words_and_gold_in_the_command(saved, tmp_path):
    directory, loaded, translator = saved
    gold = "1-1 2-2 3p3 4-4"  # ¿Dónde-Where está-is el-the baño?-bathroom?
    page = tmp_path / "page.html"
    result = inspect(directory, "--text", TEXT, "--reference", REFERENCE, "--gold", gold,
                     "--decimals", 6, "--html", page)
    assert result.exit_code == 0, result.output
    columns, rows, cells = table(result.stdout)
    assert columns == TEXT.split() and rows == REFERENCE.split()
    view = inspect_reference(loaded, translator, TEXT, REFERENCE)
    words = view.matrix("cross", words=True)
    np.testing.assert_allclose(numbers(cells), words.weights, atol=1.5e-6)
    for j, row in enumerate(cells):
        link = int(np.argmax(words.weights[j]))
        for i, cell in enumerate(row):
            assert ("+" in cell) == (i == link)
            assert ("S" in cell) == (i == j != 2) and ("P" in cell) == (i == j == 2)
    assert "words: a row word is the mean of its pieces' rows" in " ".join(result.stdout.split())
    assert '"show_words":true' in page.read_text("utf-8")
    # --step with the words view walks one token's step.
    result = inspect(directory, "--text", TEXT, "--reference", REFERENCE, "--words",
                     "--step", 1)
    assert result.exit_code == 0, result.output
    walked = "query 1" if loaded.model.self_attention_decoder else "output token 1"
    assert walked in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--input", "lines.txt", "--reference", "x"], "--reference is the translation of one "
     "sentence: use it with --text"),
    (["--text", TEXT, "--reference", " "], "--reference is empty"),
    (["--text", TEXT, "--reference", "x", "--beam", 2], "with --reference none is searched"),
    (["--text", TEXT, "--gold", "1-1"], "--gold links the words of a given translation"),
    (["--text", TEXT, "--reference", "x y", "--gold", "1-x"], "--gold: '1-x' is not a gold "
     "link"),
    (["--text", TEXT, "--reference", "x y", "--gold", "1-1 5-2"], "--gold: link 4-1 "
     "(counted from 0) is past the sentence pair of 4 source and 2 target words"),
    (["--text", TEXT, "--reference", "x", "--gold", "1-1", "--attention", "encoder"],
     "--gold marks an attention over the source, not the encoder attention"),
    (["--text", TEXT, "--attention", "alignment"], "--attention alignment: this model has "
     "no alignment layer (docs/alignment.md says how to add one"),
])
def test_bad_inputs_are_one_line_errors(saved, args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lines.txt").write_text(TEXT + "\n", encoding="utf-8")
    assert message in one_line_error(inspect(saved[0], *args))


def test_the_decoders_own_attention_folds_its_inputs_one_position_later():
    view = hand_view()
    view.attentions["decoder"] = AttentionMatrices(
        "decoder", OUTPUT, ["[START]"] + OUTPUT[:-1], "output", "decoder input",
        [WEIGHTS[None]])
    shown = view.matrix("decoder", words=True)
    w = WEIGHTS
    # Inputs [START], clean, ##ed, slate: "cleaned" is columns 1 and 2, "slate" column 3.
    expected = np.array([
        [(w[0, 0] + w[1, 0]) / 2, (w[0, 1] + w[0, 2] + w[1, 1] + w[1, 2]) / 2,
         (w[0, 3] + w[1, 3]) / 2],
        [w[2, 0], w[2, 1] + w[2, 2], w[2, 3]],
    ])
    np.testing.assert_allclose(shown.weights, expected, atol=1e-12)
    assert shown.columns == ["[START]", "cleaned", "slate"] and not shown.links


# ---- the alignment layer ---------------------------------------------------------------


@pytest.fixture(scope="module", params=sorted(MODELS))
def aligner(request, tmp_path_factory):
    """`(model directory, LoadedModel, Translator)` of a small untrained model with a
    fresh alignment layer."""
    model, source_tokenizer, target_tokenizer = model_and_tokenizers(
        **MODELS[request.param], alignment_layer=True)
    directory = tmp_path_factory.mktemp(f"{request.param}-aligner") / "model"
    saving.save_model(directory, model, source_tokenizer, target_tokenizer)
    loaded = load_model(directory)
    search = SearchConfig(beam_size=1, n_best=1, max_length_offset=4)
    return directory, loaded, loaded.translator(search)


def test_the_alignment_layer_is_shown_over_the_hypothesis_and_the_reference(aligner):
    """Its matrix is the layer's teacher-forced weights over the tokens shown: the
    model's own (`attention_maps` over the hypothesis) or the reference's (`force`)."""
    _, loaded, translator = aligner
    [translation] = translator.translate([TEXT])
    view = inspect_sentence(loaded, translator, translation)
    vocabulary = loaded.target_tokenizer.vocabulary
    tokens = translation.hypotheses[0].tokens
    target_in_ids = tf.constant([[vocabulary.id_of(token) for token in
                                  ["[START]", *tokens[:-1]]]], tf.int32)
    _, source_ids = translator.source_ids(tf.constant([TEXT]))
    maps = loaded.model.attention_maps(source_ids, target_in_ids)
    shown = view.matrix("alignment")
    assert shown.title == "alignment layer weights"
    assert (shown.rows, shown.columns) == (tokens, translation.source_tokens)
    np.testing.assert_allclose(shown.weights, np.asarray(maps["alignment"][0])[0, 0],
                               atol=1e-6)
    [forced] = force(translator, [TEXT], [REFERENCE])
    given = inspect_reference(loaded, translator, TEXT, REFERENCE)
    np.testing.assert_array_equal(given.attention("alignment").layers[0],
                                  forced.attentions["alignment"][0])
    entries = {entry["attention"]: entry for entry in given.to_dict()["attentions"]}
    assert (entries["alignment"]["title"], entries["alignment"]["linked"]) == (
        "alignment layer", True)
    assert entries["cross"]["linked"] and not entries.get("encoder", {}).get("linked")
    # Its words view links each target word to its own heaviest source word.
    words = given.matrix("alignment", words=True)
    assert words.links == {(j, int(np.argmax(row))) for j, row in enumerate(words.weights)}


def test_the_alignment_layer_in_the_command(aligner):
    directory, loaded, translator = aligner
    gold = "1-1 2-2 3p3 4-4"
    result = inspect(directory, "--text", TEXT, "--reference", REFERENCE, "--gold", gold,
                     "--attention", "alignment", "--decimals", 6)
    assert result.exit_code == 0, result.output
    assert "alignment layer weights" in result.stdout
    columns, rows, cells = table(result.stdout)
    assert columns == TEXT.split() and rows == REFERENCE.split()
    words = inspect_reference(loaded, translator, TEXT, REFERENCE).matrix("alignment",
                                                                         words=True)
    np.testing.assert_allclose(numbers(cells), words.weights, atol=1.5e-6)
    for j, row in enumerate(cells):
        link = int(np.argmax(words.weights[j]))
        for i, cell in enumerate(row):
            assert ("+" in cell) == (i == link)
            assert ("S" in cell) == (i == j != 2) and ("P" in cell) == (i == j == 2)
    # Its step: the layer's query over the encoder's outputs.
    result = inspect(directory, "--text", TEXT, "--attention", "alignment", "--step", 1)
    assert result.exit_code == 0, result.output
    assert "alignment layer: output token 1" in result.stdout
    assert "--head 2 is out of range: the alignment attention has 1 head" in one_line_error(
        inspect(directory, "--text", TEXT, "--attention", "alignment", "--head", 2))
