"""The attention page's overview of a self-attention model: one small heatmap per layer
(rows) and head (columns) of the attention chosen, coloured 0 to 1, each one opening
its layer and head in the main heatmap; in headless Chromium, on views of known
numbers (`page_views.self_attention_view`)."""

import numpy as np
import pytest

from browser import browser, tab  # noqa: F401 (fixtures)
from page_views import BLUES, READ_HEATMAP, self_attention_view

from attncli.serve.page import page_html

# Each small heatmap: its layer, head, labels and the colour at the centre of every cell.
READ_OVERVIEW = """() => {
  const grid = document.querySelector("[data-overview]");
  if (!grid || grid.closest("[hidden]")) return null;
  const scale = Number(grid.dataset.scale);
  return {
    attention: grid.dataset.overview,
    rows: [...grid.querySelectorAll("[role=rowheader]")].map((node) => node.textContent),
    columns: [...grid.querySelectorAll(".overview-label[role=columnheader]")].map(
      (node) => node.textContent),
    selected: [...grid.querySelectorAll('.thumbnail[aria-selected="true"]')].map(
      (node) => [Number(node.dataset.layer), Number(node.dataset.head)]),
    tabbable: [...grid.querySelectorAll("*")].filter((node) => node.tabIndex >= 0).length,
    thumbnails: [...grid.querySelectorAll(".thumbnail")].map((node) => {
      const canvas = node.querySelector("canvas");
      const context = canvas.getContext("2d");
      const colours = [];
      for (let y = scale / 2; y < canvas.height; y += scale) {
        const row = [];
        for (let x = scale / 2; x < canvas.width; x += scale) {
          row.push([...context.getImageData(Math.floor(x), Math.floor(y), 1, 1).data]
            .slice(0, 3));
        }
        colours.push(row);
      }
      return {layer: Number(node.dataset.layer), head: Number(node.dataset.head), colours};
    }),
  };
}"""


def open_page(tab, tmp_path, data):
    page_file = tmp_path / "view.html"
    page_file.write_text(page_html(data), encoding="utf-8")
    tab.goto(page_file.as_uri())
    tab.wait_for_selector("[data-heatmap]")


def heads_of(data, attention):
    """`(layers, heads, rows, columns)` of one attention of the view's data."""
    [entry] = [item for item in data["attentions"] if item["attention"] == attention]
    return np.array([layer["heads"] for layer in entry["layers"]])


def check_overview(shown, attention, heads):
    """The overview shows `heads` `(layers, heads, rows, columns)`: labelled rows of
    layers and columns of heads, each cell's colour Blues at its weight (0 to 1)."""
    layers, count = heads.shape[:2]
    assert shown["attention"] == attention
    assert shown["rows"] == [f"layer {n + 1}" for n in range(layers)]
    assert shown["columns"] == [f"head {n + 1}" for n in range(count)]
    assert [(each["layer"], each["head"]) for each in shown["thumbnails"]] == [
        (layer + 1, head + 1) for layer in range(layers) for head in range(count)]
    for each in shown["thumbnails"]:
        weights = heads[each["layer"] - 1, each["head"] - 1]
        expected = np.array(BLUES(weights)[..., :3]) * 255
        np.testing.assert_allclose(each["colours"], expected, atol=4,
                                   err_msg=f"layer {each['layer']} head {each['head']}")


@pytest.mark.slow
def test_every_layer_and_head_is_a_small_heatmap_that_opens_in_the_main_view(tab, tmp_path):
    data = self_attention_view(layers=2, heads=3)
    open_page(tab, tmp_path, data)
    cross = heads_of(data, "cross")
    shown = tab.evaluate(READ_OVERVIEW)
    check_overview(shown, "cross", cross)
    assert shown["selected"] == []  # the main view shows the mean of layer 2's heads
    # A click shows that layer and head in the main view, and marks it.
    tab.click('.thumbnail[data-layer="1"][data-head="2"]')
    heatmap = tab.evaluate(READ_HEATMAP)
    assert (heatmap["attention"], heatmap["layer"], heatmap["head"]) == ("cross", "1", "2")
    np.testing.assert_allclose(heatmap["weights"], cross[0, 1], atol=1e-12)
    assert tab.input_value("#layer") == "1" and tab.input_value("#head") == "2"
    assert tab.evaluate(READ_OVERVIEW)["selected"] == [[1, 2]]
    # The overview's colours stay 0 to 1 when the main view's are scaled to its largest.
    tab.select_option("#scale", "largest")
    check_overview(tab.evaluate(READ_OVERVIEW), "cross", cross)
    # The attention chosen is the one overviewed.
    tab.select_option("#attention-kind", "decoder")
    check_overview(tab.evaluate(READ_OVERVIEW), "decoder", heads_of(data, "decoder"))


@pytest.mark.slow
def test_the_overview_is_one_tab_stop_with_arrow_keys_inside(tab, tmp_path):
    data = self_attention_view(layers=2, heads=3)
    open_page(tab, tmp_path, data)
    encoder = heads_of(data, "encoder")
    tab.select_option("#attention-kind", "encoder")
    assert tab.evaluate(READ_OVERVIEW)["tabbable"] == 1
    tab.focus('.thumbnail[data-layer="1"][data-head="1"]')
    tab.keyboard.press("ArrowDown")
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("ArrowRight")  # past the last head: stays on it
    tab.keyboard.press("Enter")
    heatmap = tab.evaluate(READ_HEATMAP)
    assert (heatmap["attention"], heatmap["layer"], heatmap["head"]) == ("encoder", "2", "3")
    np.testing.assert_allclose(heatmap["weights"], encoder[1, 2], atol=1e-12)
    # The focus stays on the small heatmap it opened; Home and Space open the first head.
    assert tab.evaluate("document.activeElement.getAttribute('aria-label')") == (
        "layer 2, head 3")
    tab.keyboard.press("Home")
    tab.keyboard.press(" ")
    assert tab.evaluate(READ_HEATMAP)["head"] == "1"
    assert tab.evaluate(READ_OVERVIEW)["tabbable"] == 1
    tab.keyboard.press("Tab")
    assert tab.evaluate("!document.activeElement.closest('[data-overview]')")
    tab.keyboard.press("Shift+Tab")  # back to the small heatmap the overview was left on
    assert tab.evaluate("document.activeElement.getAttribute('aria-label')") == (
        "layer 2, head 1")


@pytest.mark.slow
def test_an_attention_of_one_layer_and_one_head_has_no_overview(tab, tmp_path):
    # A hybrid: a self-attention encoder, a recurrent decoder's one cross-attention.
    data = self_attention_view(layers=2, heads=3)
    data["attentions"] = [entry for entry in data["attentions"]
                          if entry["attention"] != "decoder"]
    cross = data["attentions"][0]
    cross["layers"] = cross["layers"][:1]
    cross["layers"][0]["heads"] = cross["layers"][0]["heads"][:1]
    open_page(tab, tmp_path, data)
    assert tab.evaluate(READ_OVERVIEW) is None
    tab.select_option("#attention-kind", "encoder")
    check_overview(tab.evaluate(READ_OVERVIEW), "encoder", heads_of(data, "encoder"))
    tab.select_option("#attention-kind", "cross")
    assert tab.evaluate(READ_OVERVIEW) is None
