"""The attention page in a real headless Chromium (Debian's `chromium`, driven by
Playwright): the offline file `inspect-weights --html` writes, the page `attncli serve`
serves, and the page's choices of attention, layer and head on a view of known numbers.

On a machine without the browser or Playwright these tests skip; with `CI` set they fail.
"""

import contextlib
import html.parser
import json
import re
import urllib.error
import urllib.request

import numpy as np
import pytest
from typer.testing import CliRunner

from attncli_runs import REPO, start, stop, trained, wait_for  # noqa: F401 (trained: a fixture)
from browser import browser, free_port, tab  # noqa: F401 (browser and tab: fixtures)
from cli_errors import one_line_error
from page_views import BLUES, READ_HEATMAP, self_attention_view

from attncli.cli.app import app
from attncli.serve.page import embedded_json, page_html

SENTENCE = "tengo hambre ."

READ_WALK = """() => [...document.querySelectorAll("#walk tbody tr")].map(
  (row) => Number(row.dataset.weight))"""


class Scripts(html.parser.HTMLParser):
    """Every <script> element of a page: its attributes and its text."""

    def __init__(self):
        super().__init__()
        self.scripts = []
        self._open = None

    def handle_starttag(self, tag, attributes):
        if tag == "script":
            self._open = [dict(attributes), ""]

    def handle_data(self, data):
        if self._open is not None:
            self._open[1] += data

    def handle_endtag(self, tag):
        if tag == "script" and self._open is not None:
            self.scripts.append(tuple(self._open))
            self._open = None


def scripts_of(page):
    parser = Scripts()
    parser.feed(page)
    return parser.scripts


def test_embedded_tokens_cannot_close_the_data_script():
    hostile = ["</script><script>window.hacked = 1</script>", "<!--", "</SCRIPT >", "&amp;",
               "a\u2028b", "ü"]
    data = {"source": " ".join(hostile), "source_tokens": hostile}
    page = page_html(data)
    scripts = scripts_of(page)
    # The data and the page's own script: nothing the tokens held became an element.
    assert [attributes.get("id") for attributes, _ in scripts] == ["attncli-data", None]
    assert json.loads(scripts[0][1]) == data
    assert "<" not in embedded_json(data) and ">" not in embedded_json(data)


def test_embedded_data_refuses_numbers_json_has_not():
    with pytest.raises(ValueError):
        embedded_json({"scores": [float("-inf")]})


def test_the_page_is_one_file_that_asks_nothing_from_elsewhere():
    page = page_html()
    assert re.findall(r'(?:src|href)="([^"]*)"', page) == ["data:,"]
    assert "http://" not in page and "https://" not in page and "static/" not in page
    assert scripts_of(page)[0] == ({"type": "application/json", "id": "attncli-data"}, "")


# ---- in the browser ---------------------------------------------------------------------


def walk_step(page, step):
    """Choose row `step`'s token; the walk's weights."""
    page.click(f'.row-label[data-row="{step - 1}"]')
    page.wait_for_selector(f'#walk[data-step="{step}"]:not([hidden])')
    return page.evaluate(READ_WALK)


def check_heatmap_and_walk(page, rows, columns):
    """The heatmap is (output tokens × source tokens), its rows sum to 1, and each
    output token's walk has that row's weights."""
    shown = page.evaluate(READ_HEATMAP)
    assert (shown["attention"], shown["rows"], shown["columns"]) == ("cross", rows, columns)
    weights = np.array(shown["weights"], dtype=float)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-4)
    for step in (len(rows), 1):
        np.testing.assert_allclose(walk_step(page, step), weights[step - 1], atol=1e-6)
    # A cell tells its weight and both tokens when the pointer is on it.
    page.hover('.cell[data-row="0"][data-column="1"]')
    info = page.inner_text("#cell-info")
    assert rows[0] in info and columns[1] in info and f"{weights[0, 1]:.3f}" in info


def in_process(*args):
    """`attncli ARGS` in this process, which must succeed (the page is what is tested)."""
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def translated(trained):  # noqa: F811
    """`attncli translate`'s JSON line of SENTENCE: the tokens and text the page shows."""
    return json.loads(in_process("translate", trained, SENTENCE, "--format", "json").stdout)


@pytest.mark.slow
def test_the_offline_file_shows_the_attention_and_walks_a_step(
        tab, trained, translated, tmp_path):  # noqa: F811
    page_file = tmp_path / "pages" / "hungry.html"  # the folder is made
    in_process("inspect-weights", trained, "--text", SENTENCE, "--html", page_file)
    url = page_file.resolve().as_uri()
    tab.goto(url)
    tab.wait_for_selector("[data-heatmap]")
    best = translated["hypotheses"][0]
    assert tab.inner_text(".translation") == best["text"]
    check_heatmap_and_walk(tab, best["tokens"], translated["source_tokens"])
    assert set(tab.requests) == {url}


@pytest.mark.slow
@pytest.mark.parametrize("arguments, message", [
    (["--text", SENTENCE, "--html", "page.txt"], "--html page.txt: the page is an HTML file"),
    (["--text", SENTENCE, "--html", "missing/deeper/page.html"], "no such folder missing"),
    (["--input", "lines.txt", "--html", "page.html"], "use it with --text"),
])
def test_a_bad_html_option_is_one_line(trained, arguments, message, tmp_path,  # noqa: F811
                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lines.txt").write_text(SENTENCE + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["inspect-weights", str(trained), *arguments])
    assert message in one_line_error(result)
    assert not any(tmp_path.glob("**/*.htm*"))


# ---- with a server ----------------------------------------------------------------------


def ready(url):
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def server(trained, tmp_path_factory):  # noqa: F811
    """`attncli serve` of the tiny run on a free loopback port."""
    url = f"http://127.0.0.1:{free_port()}"
    process = start("serve", trained, "--port", url.rsplit(":", 1)[1],
                    cwd=tmp_path_factory.mktemp("serve"))
    try:
        wait_for(lambda: ready(url), process)
        yield url
    finally:
        stop(process)


@pytest.mark.slow
def test_the_served_page_translates_shows_the_attention_and_walks_a_step(
        tab, server, translated):
    tab.goto(f"{server}/")
    tab.wait_for_selector("#model option", state="attached")
    # A refused request is one line on the page, and the next good one is answered.
    tab.fill("#texts", SENTENCE)
    tab.fill("#beam", "100000")
    tab.click("#submit")
    tab.wait_for_selector("#error:not([hidden])")
    assert "beam" in tab.inner_text("#error") and "\n" not in tab.inner_text("#error")
    tab.fill("#beam", "")
    tab.click("#submit")
    tab.wait_for_selector("[data-heatmap]")
    assert tab.is_hidden("#error")
    best = translated["hypotheses"][0]
    assert tab.inner_text(".translation") == best["text"]
    check_heatmap_and_walk(tab, best["tokens"], translated["source_tokens"])
    # The first output token's walk names what came before it as the vocabulary does.
    assert "(after [START])" in tab.inner_text("#walk h3")
    assert {re.sub(r"^http://[^/]+", "", url) for url in tab.requests} == {
        "/", "/models", "/translate", "/inspect", "/step"}


@pytest.mark.slow
def test_a_sentence_longer_than_the_training_pairs_is_noted(tab, server):
    with urllib.request.urlopen(f"{server}/models", timeout=10) as answer:
        [model] = json.load(answer)["models"]
    assert model["max_length"] == 12  # configs/tiny-test.yaml's data.max_length
    tab.goto(f"{server}/")
    tab.wait_for_selector("#model option", state="attached")
    tab.fill("#texts", SENTENCE)
    tab.click("#submit")
    tab.wait_for_selector("[data-heatmap]")
    assert tab.is_hidden("#long-input")
    # A recurrent model has one attention of one layer and one head: no overview.
    assert tab.is_hidden("#overview")
    tab.fill("#texts", " ".join([SENTENCE] * 5))
    with tab.expect_response("**/inspect") as answer:
        tab.click("#submit")
    count = len(answer.value.json()["source_tokens"])
    assert count > 12
    tab.wait_for_selector("#long-input:not([hidden])")
    assert tab.inner_text("#long-input") == (
        f"This sentence is {count} tokens; the model was trained on sentences of at most 12.")


@pytest.mark.slow
def test_the_training_max_length_is_read_from_the_run_or_the_model(
        trained, tmp_path):  # noqa: F811
    import shutil

    import yaml

    from attncli.cli.runs import shipped_models
    from attncli.model.saving import saved_metadata
    from attncli.serve.registry import training_max_length

    demo = shipped_models()["demo"]
    config = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text(encoding="utf-8"))
    assert training_max_length(demo, saved_metadata(demo)) == config["data"]["max_length"]
    model = trained / "model"
    assert training_max_length(model, saved_metadata(model)) == 12
    # A model folder copied out of its run has no config to say: nothing is shown.
    alone = tmp_path / "model"
    shutil.copytree(model, alone)
    assert training_max_length(alone, saved_metadata(alone)) is None


# ---- the choices of a self-attention model, on known numbers ----------------------------


@pytest.mark.slow
def test_attention_layer_and_head_are_chosen_and_a_mean_is_shown(tab, tmp_path):
    data = self_attention_view()
    page_file = tmp_path / "known.html"
    page_file.write_text(page_html(data), encoding="utf-8")
    tab.goto(page_file.as_uri())
    tab.wait_for_selector("[data-heatmap]")
    heads = {entry["attention"]: np.array([layer["heads"] for layer in entry["layers"]])
             for entry in data["attentions"]}
    # Cross-attention of the last layer, the mean of its heads, first.
    shown = tab.evaluate(READ_HEATMAP)
    assert (shown["attention"], shown["layer"], shown["head"]) == ("cross", "2", "mean")
    np.testing.assert_allclose(shown["weights"], heads["cross"][1].mean(axis=0), atol=1e-12)
    tab.select_option("#attention-kind", "decoder")
    tab.select_option("#layer", "1")
    tab.select_option("#head", "3")
    shown = tab.evaluate(READ_HEATMAP)
    assert shown["columns"] == ["[START]", "the", "dog", "eats", "."]
    np.testing.assert_allclose(shown["weights"], heads["decoder"][0, 2], atol=1e-12)
    np.testing.assert_allclose(walk_step(tab, 4), heads["decoder"][0, 2, 3], atol=1e-12)
    # The keyboard reaches a token: focus its button, press Enter.
    tab.focus('.row-label[data-row="1"]')
    tab.keyboard.press("Enter")
    tab.wait_for_selector('#walk[data-step="2"]')
    # Arrow keys move between cells; Enter walks the focused cell's row.
    tab.focus('.cell[data-row="0"][data-column="0"]')
    tab.keyboard.press("ArrowDown")
    tab.keyboard.press("ArrowDown")
    tab.keyboard.press("ArrowRight")
    assert tab.evaluate("document.activeElement.getAttribute('aria-label')").startswith(
        "output 3 eats → source 2 the")
    tab.keyboard.press("Enter")
    tab.wait_for_selector('#walk[data-step="3"]')
    # The encoder's self-attention, its mean walks head 1 and says so.
    tab.select_option("#attention-kind", "encoder")
    np.testing.assert_allclose(walk_step(tab, 1), heads["encoder"][1, 0, 0], atol=1e-12)
    assert "head 1" in tab.inner_text("#walk .note")


@pytest.mark.slow
def test_long_sentences_scroll_and_keep_their_labels(tab, tmp_path):
    data = self_attention_view()
    long = [f"word{n}" for n in range(60)]
    cross = data["attentions"][0]
    cross["columns"] = long
    cross["layers"] = [{"heads": [[[1 / 60] * 60] * 5] * 3}] * 2
    page_file = tmp_path / "long.html"
    page_file.write_text(page_html(data), encoding="utf-8")
    tab.goto(page_file.as_uri())
    tab.wait_for_selector("[data-heatmap]")
    sizes = tab.evaluate("""() => {
      const box = document.querySelector("#heatmap-scroll");
      return {page: document.documentElement.scrollWidth, client: box.clientWidth,
              scroll: box.scrollWidth};
    }""")
    # The heatmap scrolls inside its box; the page itself stays a phone's width.
    assert sizes["scroll"] > sizes["client"] and sizes["page"] <= 375
    tab.evaluate("document.querySelector('#heatmap-scroll').scrollLeft = 100000")
    label = tab.locator('.row-label[data-row="0"]').bounding_box()
    assert label["x"] >= 0 and label["x"] < 40
    column = tab.locator('.column-label[data-column="0"]').bounding_box()
    assert column["height"] > column["width"]  # rotated, not squeezed


# ---- a given reference, its words and links --------------------------------------------

REFERENCE = "i am hungry ."
GOLD = "1-1 1p2 2-3 3-4"  # tengo-i, tengo-am (possible), hambre-hungry, .-.
READ_MARKS = """() => {
  const grid = document.querySelector("[data-heatmap]");
  const cells = (selector) => [...grid.querySelectorAll(selector)].map(
    (cell) => [Number(cell.dataset.row), Number(cell.dataset.column)]);
  return {words: grid.dataset.words, links: cells(".cell[data-link]"),
          sure: cells('.cell[data-gold="sure"]'), possible: cells('.cell[data-gold="possible"]')};
}"""


def expected_links(data, words):
    """The cells of the links of the embedded or served view, worked out here: each
    target word linked to its source word of largest word weight (the mean of the
    heads of the last layer), on its cell (`words`) or on its pieces' cells."""
    entry = data["words"]["attentions"][0]
    weights = np.mean(entry["layers"][-1]["heads"], axis=0)
    source, target = data["words"]["source"], data["words"]["target"]
    cells = set()
    for j, row in enumerate(weights):
        i = int(np.argmax(row))
        if words:
            cells.add((j, i))
        else:
            cells.update((t, s) for t in target[j]["positions"] for s in source[i]["positions"])
    return cells


def check_words_and_links(page, data):
    """The words view with its links and gold, then the token view with its links."""
    shown = page.evaluate(READ_HEATMAP)
    assert shown["rows"] == REFERENCE.split() and shown["columns"] == SENTENCE.split()
    marks = page.evaluate(READ_MARKS)
    assert marks["words"] == "true"
    assert {tuple(cell) for cell in marks["links"]} == expected_links(data, True)
    assert sorted(map(tuple, marks["sure"])) == [(0, 0), (2, 1), (3, 2)]
    assert [tuple(cell) for cell in marks["possible"]] == [(1, 0)]
    assert "mean of its pieces' rows" in page.inner_text("#hint")
    assert "sure gold link" in page.inner_text("#marks")
    page.click("#words")
    shown = page.evaluate(READ_HEATMAP)
    assert shown["rows"] == data["hypotheses"][0]["tokens"]
    marks = page.evaluate(READ_MARKS)
    assert marks["words"] == "false" and not marks["sure"] and not marks["possible"]
    assert {tuple(cell) for cell in marks["links"]} == expected_links(data, False)
    np.testing.assert_allclose(walk_step(page, 1), shown["weights"][0], atol=1e-6)


@pytest.mark.slow
def test_the_offline_file_of_a_reference_shows_its_words_links_and_gold(
        tab, trained, tmp_path):  # noqa: F811
    page_file = tmp_path / "reference.html"
    in_process("inspect-weights", trained, "--text", SENTENCE, "--reference", REFERENCE,
               "--gold", GOLD, "--html", page_file)
    [data] = [json.loads(text) for attributes, text in scripts_of(page_file.read_text("utf-8"))
              if attributes.get("id") == "attncli-data"]
    tab.goto(page_file.resolve().as_uri())
    tab.wait_for_selector("[data-heatmap]")
    assert data["reference"]["score"] == data["hypotheses"][0]["score"]
    assert f"score {data['reference']['score']:.3f} (log P / lp" in tab.inner_text(
        "#reference-score")
    check_words_and_links(tab, data)


@pytest.mark.slow
def test_the_served_page_shows_the_attention_over_a_reference_with_words_and_gold(
        tab, server):
    tab.goto(f"{server}/")
    tab.wait_for_selector("#model option", state="attached")
    tab.fill("#texts", SENTENCE)
    # A gold line without its reference is refused on the page, in one line.
    tab.fill("#golds", GOLD)
    tab.click("#submit")
    tab.wait_for_selector("#error:not([hidden])")
    assert "give its reference translation too" in tab.inner_text("#error")
    tab.fill("#references", REFERENCE)
    with tab.expect_response("**/inspect") as answer:
        tab.click("#submit")
    data = answer.value.json()
    assert json.loads(answer.value.request.post_data) == {
        "text": SENTENCE, "model": "run", "words": True, "reference": REFERENCE, "gold": GOLD}
    tab.wait_for_selector("[data-heatmap]")
    assert tab.is_hidden("#error")
    assert tab.inner_text(".result .given") == f"reference: {REFERENCE}"
    check_words_and_links(tab, data)
    # The sentence's own translation, from its other button: no reference, no gold.
    tab.locator(".result .inspect").nth(1).click()
    tab.locator("#reference-score").wait_for(state="detached")
    assert not tab.evaluate(READ_MARKS)["sure"]


# ---- colours, keyboard, read-out, tokens, loading, walk width (issue 47) ----------------

# Matplotlib's "Blues" as `inspect-weights --png` draws it (vmin 0, vmax 1).
READ_BACKGROUNDS = """() => [...document.querySelectorAll("[data-heatmap] .cell")].map((cell) => [
  Number(cell.dataset.row), Number(cell.dataset.column), Number(cell.dataset.weight),
  getComputedStyle(cell).backgroundColor.match(/\\d+/g).map(Number)])"""


def check_colours(page, top):
    """Every cell's colour is Blues at its weight / `top`, within rounding."""
    for _, _, weight, rgb in page.evaluate(READ_BACKGROUNDS):
        expected = np.array(BLUES(weight / top)[:3]) * 255
        np.testing.assert_allclose(rgb, expected, atol=4, err_msg=f"weight {weight}")


@pytest.mark.slow
def test_colours_are_0_to_1_as_in_the_png_and_scaled_to_the_largest_by_choice(tab, tmp_path):
    data = self_attention_view()
    page_file = tmp_path / "known.html"
    page_file.write_text(page_html(data), encoding="utf-8")
    tab.goto(page_file.as_uri())
    tab.wait_for_selector("[data-heatmap]")
    largest = max(weight for _, _, weight, _ in tab.evaluate(READ_BACKGROUNDS))
    assert largest < 0.8  # a mean of heads: the two scales differ
    check_colours(tab, 1.0)
    assert tab.inner_text("#legend-top") == "1"
    tab.select_option("#scale", "largest")
    check_colours(tab, largest)
    assert tab.inner_text("#legend-top") == f"{largest:.3f}"
    # The choice holds for the next view.
    tab.select_option("#head", "2")
    largest = max(weight for _, _, weight, _ in tab.evaluate(READ_BACKGROUNDS))
    check_colours(tab, largest)


@pytest.mark.slow
def test_tokens_are_shown_as_written_and_the_read_out_is_beside_the_cell(tab, tmp_path):
    data = self_attention_view()
    data["attentions"][0]["rows"] = ["i", "'", "m", "hungry", "[END]"]
    page_file = tmp_path / "apostrophe.html"
    page_file.write_text(page_html(data), encoding="utf-8")
    tab.goto(page_file.as_uri())
    tab.wait_for_selector("[data-heatmap]")
    for width in (375, 1280):
        tab.set_viewport_size({"width": width, "height": 800})
        for row, column in ((1, 0), (4, 3)):
            cell = f'.cell[data-row="{row}"][data-column="{column}"]'
            tab.hover(cell)
            assert tab.evaluate("[...document.querySelectorAll('#cell-info .token')].map("
                                "(node) => node.textContent)") == [
                data["attentions"][0]["rows"][row], data["source_tokens"][column]]
            assert "‘" not in tab.inner_text("#cell-info")
            box, info = tab.locator(cell).bounding_box(), tab.locator("#cell-info").bounding_box()
            # On the cell's row, just right or left of it; on a phone, where neither side
            # has room, just under it. On the screen.
            on_row = (info["y"] < box["y"] + box["height"]
                      and info["y"] + info["height"] > box["y"])
            beside = on_row and (0 <= info["x"] - (box["x"] + box["width"]) < 16
                                 or 0 <= box["x"] - (info["x"] + info["width"]) < 16)
            under = (0 <= info["y"] - (box["y"] + box["height"]) < 16
                     and info["x"] < box["x"] + box["width"]
                     and info["x"] + info["width"] > box["x"])
            assert beside or (width == 375 and under), (box, info)
            assert info["x"] >= 0 and info["x"] + info["width"] <= width
    tab.mouse.move(0, 0)
    assert tab.is_hidden("#cell-info")


@pytest.mark.slow
def test_the_walk_table_fits_a_wide_screen(tab, tmp_path):
    data = self_attention_view()
    for record in data["steps"].values():
        for name in ("inputs", "keys", "values", "weighted_values"):
            record[name] = [[-0.123456] * 8 for _ in record[name]]
    page_file = tmp_path / "wide.html"
    page_file.write_text(page_html(data), encoding="utf-8")
    for width in (1280, 375):
        tab.set_viewport_size({"width": width, "height": 800})
        tab.goto(page_file.as_uri())
        tab.wait_for_selector("[data-heatmap]")
        tab.select_option("#attention-kind", "encoder")
        walk_step(tab, 2)
        sizes = tab.evaluate("""() => {
          const box = document.querySelector("#walk .table-scroll");
          return {scroll: box.scrollWidth, client: box.clientWidth,
                  shown: [...box.querySelectorAll("tbody .vector")][0].innerText};
        }""")
        # A wide screen shows the components that fit, and all its columns; a phone the
        # norms alone (its table still scrolls: eight columns are wider than a phone).
        assert ("-0.123" in sizes["shown"]) == (width == 1280), sizes
        assert sizes["scroll"] <= sizes["client"] or width == 375, sizes


# Each row's probability as the page shows it: the number, its text, and its bar's
# length as a fraction of its track.
READ_PROBABILITIES = """() => [...document.querySelectorAll("[data-heatmap] .row-head")].map(
  (head) => {
    const node = head.querySelector(".probability");
    if (!node) return null;
    const bar = node.querySelector(".bar").getBoundingClientRect().width;
    const track = node.querySelector(".track").getBoundingClientRect().width;
    return [Number(node.dataset.probability), node.querySelector(".value").textContent,
            bar / track];
  })"""


def check_probabilities(page, expected):
    """Beside each row, `expected[row]` (None: nothing), as a percentage and a bar."""
    shown = page.evaluate(READ_PROBABILITIES)
    assert [each is None for each in shown] == [each is None for each in expected]
    for each, probability in zip(shown, expected):
        if probability is not None:
            np.testing.assert_allclose(each[0], probability, rtol=1e-9)
            assert each[1] == (f"{round(probability * 100)}%" if probability >= 0.005
                               else "<1%")
            np.testing.assert_allclose(each[2], probability, atol=0.02)


@pytest.mark.slow
def test_each_output_token_shows_its_probability_beside_its_row(tab, tmp_path):
    data = self_attention_view()
    data["token_log_probs"] = [np.log(0.93), np.log(0.5), np.log(0.004), None, 0.0]
    expected = [0.93, 0.5, 0.004, 0.0, 1.0]  # a log P of null is -inf
    page_file = tmp_path / "probabilities.html"
    page_file.write_text(page_html(data), encoding="utf-8")
    tab.goto(page_file.as_uri())
    tab.wait_for_selector("[data-heatmap]")
    check_probabilities(tab, expected)
    assert "how probable the model finds it" in tab.inner_text("#hint")
    # The decoder's rows are the output tokens too; the encoder's are the source's.
    tab.select_option("#attention-kind", "decoder")
    check_probabilities(tab, expected)
    tab.select_option("#attention-kind", "encoder")
    check_probabilities(tab, [None] * 4)
    assert "probable" not in tab.inner_text("#hint")


@pytest.mark.slow
def test_the_served_page_shows_each_token_s_probability_over_its_own_and_a_reference(
        tab, server):
    tab.goto(f"{server}/")
    tab.wait_for_selector("#model option", state="attached")
    tab.fill("#texts", SENTENCE)
    tab.fill("#references", REFERENCE)
    tab.fill("#golds", GOLD)
    with tab.expect_response("**/inspect") as answer:
        tab.click("#submit")
    data = answer.value.json()
    tab.wait_for_selector("[data-heatmap]")
    logs = np.array(data["token_log_probs"], dtype=float)
    assert len(logs) == len(data["hypotheses"][0]["tokens"])
    np.testing.assert_allclose(logs.sum(), data["reference"]["log_prob"], atol=1e-4)
    # The words view opens (gold links): a word's is the product of its pieces'.
    check_probabilities(tab, [np.exp(logs[word["positions"]].sum())
                              for word in data["words"]["target"]])
    tab.click("#words")
    check_probabilities(tab, np.exp(logs))
    # The model's own translation: its tokens' probabilities as the search found them.
    with tab.expect_response("**/inspect") as answer:
        tab.locator(".result .inspect").nth(1).click()
    own = answer.value.json()
    tab.locator("#reference-score").wait_for(state="detached")
    assert len(own["token_log_probs"]) == len(own["hypotheses"][0]["tokens"])
    check_probabilities(tab, np.exp(own["token_log_probs"]))


@pytest.mark.slow
def test_the_keyboard_submits_focuses_the_result_and_tabs_over_the_grid_once(tab, server):
    tab.goto(f"{server}/")
    tab.wait_for_selector("#model option", state="attached")
    tab.fill("#texts", SENTENCE)
    tab.focus("#texts")
    tab.keyboard.press("Control+Enter")
    tab.wait_for_selector("[data-heatmap]")
    # A locator, not wait_for_function: the page's CSP forbids the eval its polling uses.
    from playwright.sync_api import expect

    expect(tab.locator("#results")).to_be_focused()
    assert tab.input_value("#texts") == SENTENCE  # no line break was typed
    tabbable = tab.evaluate("""() => [...document.querySelectorAll("[data-heatmap] *")]
      .filter((node) => node.tabIndex >= 0).length""")
    assert tabbable == 1
    tab.focus('.cell[data-row="0"][data-column="0"]')
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("Tab")
    assert tab.evaluate("!document.activeElement.closest('[data-heatmap]')")
    tab.keyboard.press("Shift+Tab")  # back to the cell the grid was left on
    assert tab.evaluate("document.activeElement.dataset.column") == "1"
    # Cmd+Enter too.
    tab.fill("#texts", "tengo hambre")
    with tab.expect_response("**/translate"):
        tab.focus("#texts")
        tab.keyboard.press("Meta+Enter")


@contextlib.contextmanager
def uvicorn_serving(app):
    """`app` served by uvicorn on a free loopback port, in a thread: its base URL."""
    import threading

    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        wait_for(lambda: server.started, None)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()


@pytest.mark.slow
def test_a_page_opened_while_the_models_load_opens_them_when_they_are_ready(tab):
    from fake_server import FakeModel

    from attncli.serve.app import create_app
    from attncli.serve.limits import Limits
    from attncli.serve.registry import Registry

    registry = Registry([("fake", [])], Limits())
    with uvicorn_serving(create_app(registry, registry.limits)) as url:
        tab.goto(f"{url}/")
        tab.wait_for_selector("#busy:not([hidden])")
        assert "loading" in tab.inner_text("#busy") and tab.is_hidden("#error")
        assert tab.is_disabled("#submit")
        registry.models = {"fake": FakeModel()}
        registry.ready = True
        tab.wait_for_selector("#model option", state="attached", timeout=20_000)
        assert tab.is_hidden("#busy") and tab.is_enabled("#submit")
        assert tab.is_hidden("#error")


# ---- the alignment layer ----------------------------------------------------------------

ALIGNER_TEXT, ALIGNER_REFERENCE = "estoy aquí .", "i am lost ."


@pytest.fixture(scope="module")
def aligner(tmp_path_factory):
    """The fixture run's model with a fresh alignment layer beside its own weights."""
    from attncli_process import FIXTURE_RUN
    from guided_runs import with_alignment_layer

    return with_alignment_layer(FIXTURE_RUN, tmp_path_factory.mktemp("aligner") / "model")


@pytest.mark.slow
def test_the_page_lists_and_draws_the_alignment_layer_with_its_links(tab, aligner, tmp_path):
    page_file = tmp_path / "aligner.html"
    in_process("inspect-weights", aligner, "--text", ALIGNER_TEXT, "--reference",
               ALIGNER_REFERENCE, "--gold", "1-1 2-2 3-4", "--html", page_file)
    [data] = [json.loads(text) for attributes, text in scripts_of(page_file.read_text("utf-8"))
              if attributes.get("id") == "attncli-data"]
    tab.set_viewport_size({"width": 1280, "height": 900})
    tab.goto(page_file.resolve().as_uri())
    tab.wait_for_selector("[data-heatmap]")
    assert tab.eval_on_selector_all("#attention-kind option", "(nodes) => nodes.map("
                                    "(node) => [node.value, node.textContent])") == [
        ["cross", "cross-attention"], ["alignment", "alignment layer"]]
    tab.select_option("#attention-kind", "alignment")
    assert tab.is_hidden("#layer-choice") and tab.is_hidden("#head-choice")
    shown = tab.evaluate(READ_HEATMAP)
    [words] = [entry for entry in data["words"]["attentions"]
               if entry["attention"] == "alignment"]
    [weights] = words["layers"][0]["heads"]
    assert (shown["attention"], shown["rows"], shown["columns"]) == (
        "alignment", ALIGNER_REFERENCE.split(), ALIGNER_TEXT.split())
    np.testing.assert_allclose(shown["weights"], weights, atol=1e-6)
    # The links are the layer's own: each target word's heaviest source word.
    marks = tab.evaluate(READ_MARKS)
    assert {tuple(cell) for cell in marks["links"]} == {
        (j, int(np.argmax(row))) for j, row in enumerate(weights)}
    assert sorted(map(tuple, marks["sure"])) == [(0, 0), (1, 1), (3, 2)]
    tab.hover('.cell[data-row="1"][data-column="1"]')
    tab.screenshot(path=tmp_path / "aligner-words-1280.png", full_page=True)
    # Its token view and a step's walk, the layer's query over h̄_s.
    tab.click("#words")
    shown = tab.evaluate(READ_HEATMAP)
    [tokens] = [entry for entry in data["attentions"] if entry["attention"] == "alignment"]
    np.testing.assert_allclose(shown["weights"], tokens["layers"][0]["heads"][0], atol=1e-6)
    np.testing.assert_allclose(walk_step(tab, 2), shown["weights"][1], atol=1e-6)
    assert "alignment layer, layer 1" in tab.inner_text("#walk h3")
    assert "reads the token itself" in tab.inner_text("#walk")
    tab.screenshot(path=tmp_path / "aligner-walk-1280.png", full_page=True)


@pytest.mark.slow
def test_the_offline_page_opens_on_the_attention_asked_for(tab, aligner, tmp_path):
    pages = {}
    for attention in ("alignment", None):
        pages[attention] = tmp_path / f"{attention}.html"
        chosen = ["--attention", attention] if attention else []
        in_process("inspect-weights", aligner, "--text", ALIGNER_TEXT, "--reference",
                   ALIGNER_REFERENCE, *chosen, "--html", pages[attention])
    for attention, expected in (("alignment", "alignment"), (None, "cross")):
        tab.goto(pages[attention].resolve().as_uri())
        tab.wait_for_selector("[data-heatmap]")
        assert tab.eval_on_selector("#attention-kind", "(node) => node.value") == expected
        assert tab.evaluate(READ_HEATMAP)["attention"] == expected

