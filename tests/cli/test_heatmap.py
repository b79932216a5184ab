import io

import numpy as np
import pytest
from matplotlib import font_manager
from matplotlib.ft2font import FT2Font
from rich.console import Console

from attncli.cli import fonts
from attncli.cli.fonts import font_families, glyph_notice
from attncli.cli.heatmap import heatmap_figure, heatmap_table, save_heatmap_png

SOURCE = ["tengo", "un", "gato", "."]
OUTPUT = ["i", "have", "a", "cat", "."]
WEIGHTS = np.array(
    [
        [0.90, 0.05, 0.03, 0.02],
        [0.80, 0.10, 0.05, 0.05],
        [0.10, 0.85, 0.03, 0.02],
        [0.02, 0.08, 0.88, 0.02],
        [0.01, 0.01, 0.08, 0.90],
    ]
)


def render(table):
    console = Console(record=True, width=120, color_system="truecolor",
                      force_terminal=True, file=io.StringIO())
    console.print(table)
    return console.export_text(clear=False), console.export_text(styles=True)


def test_table_has_source_columns_output_rows_and_marks_each_row_maximum():
    plain, styled = render(heatmap_table(SOURCE, OUTPUT, WEIGHTS))
    header = plain.splitlines()[1]
    for token in SOURCE:
        assert token in header
    rows = [line for line in plain.splitlines() if line.startswith(("│i ", "│cat "))]
    assert len(rows) == 2
    assert "0.90*" in rows[0] and "0.88*" in rows[1]
    assert plain.count("*") == len(OUTPUT)
    assert "48;2;" in styled  # cells carry a truecolor background shade


def test_shape_mismatch_is_reported():
    with pytest.raises(ValueError, match=r"expected \(outputs, sources\) = \(5, 3\)"):
        heatmap_table(SOURCE[:3], OUTPUT, WEIGHTS)


def test_png_is_written(tmp_path):
    path = tmp_path / "attention.png"
    save_heatmap_png(SOURCE, OUTPUT, WEIGHTS, path, title="es → en")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5000


# A 14-token sentence of long words whose short translation once put the caption over
# the colour bar's label and cut it at both edges.
LONG_SOURCE = [f"palabra{index:02d}larga" for index in range(14)]
LONG_OUTPUT = ["wordlongerthanmost", "wordlongerthanmost"]
SPANISH = "Ellos no quieren ir a la escuela mañana por la tarde con sus amigos .".split()
ENGLISH = "they don't want to go to school tomorrow afternoon with their friends . [END]"


def laid_out(figure):
    """The figure drawn once; its caption (the figure-level text) and renderer."""
    figure.draw_without_rendering()
    [caption] = [text for text in figure.texts if text.get_text()]
    return caption, figure.canvas.get_renderer()


@pytest.mark.parametrize("case", ["long labels", "14 tokens", "1 token"])
def test_caption_is_inside_the_picture_and_clear_of_the_axes_and_colour_bar(case):
    source, output = {
        "long labels": (LONG_SOURCE, LONG_OUTPUT),
        "14 tokens": (SPANISH, ENGLISH.split()),
        "1 token": (["hola"], ["hello"]),
    }[case]
    weights = np.random.default_rng(0).dirichlet(np.ones(len(source)), size=len(output))
    title = f"{' '.join(source)} → {' '.join(output)}\nattention weights"
    figure = heatmap_figure(source, output, weights, title=title, cell_decimals=2)
    caption, renderer = laid_out(figure)
    box = caption.get_window_extent(renderer)
    width, height = figure.canvas.get_width_height()
    assert 0 <= box.x0 and box.x1 <= width and 0 <= box.y0
    assert len(figure.axes) == 2  # the matrix and its colour bar
    for axes in figure.axes:
        # The whole of each axes: its cells, tick labels, axis labels, colour bar label.
        assert not box.overlaps(axes.get_tightbbox(renderer)), axes
        assert axes.get_tightbbox(renderer).y0 > box.y1
    # Each cell keeps about 0.45 inch of height, whatever the labels take.
    cells = figure.axes[0].get_window_extent(renderer).height / figure.dpi / len(output)
    assert cells >= 0.44


def test_cell_weights_are_printed_in_the_cells():
    figure = heatmap_figure(SOURCE, OUTPUT, WEIGHTS, cell_decimals=2)
    texts = {(round(text.get_position()[1]), round(text.get_position()[0])): text.get_text()
             for text in figure.axes[0].texts}
    assert len(texts) == WEIGHTS.size
    assert texts[(0, 0)] == "0.90" and texts[(3, 2)] == "0.88" and texts[(4, 1)] == "0.01"
    assert not heatmap_figure(SOURCE, OUTPUT, WEIGHTS).axes[0].texts


def test_default_font_draws_latin_greek_and_cyrillic():
    _, missing = font_families(["mañana", "καλημέρα", "доброе утро", "→"], fonts=[])
    assert missing == []


def test_han_characters_without_a_font_are_named():
    _, missing = font_families(["我们 go", "[END]"], fonts=[])
    assert missing == ["们", "我"]
    notice = glyph_notice(missing)
    assert "\n" not in notice and "我 们" not in notice and "们 我" in notice
    assert "and 2 more" in glyph_notice([chr(0x4E00 + i) for i in range(14)])


def test_han_characters_take_an_installed_font_that_has_them():
    han = [path for path in font_manager.findSystemFonts()
           if {ord("我"), ord("们")} <= set(FT2Font(path).get_charmap())
           and not FT2Font(path).family_name.startswith("Last Resort")]
    if not han:
        pytest.skip("no installed font has Han characters (e.g. fonts-noto-cjk)")
    families, missing = font_families(["我们 go"])
    assert missing == []
    assert len(families) == 2
    assert families[1] in {FT2Font(path).family_name for path in han}


def test_png_reports_the_glyphs_no_font_has(tmp_path, monkeypatch):
    monkeypatch.setattr(fonts, "_installed_fonts", lambda: [])
    path = tmp_path / "cmn.png"
    missing = save_heatmap_png(list("我们走"), ["we", "go"], np.full((2, 3), 1 / 3), path,
                               title="我们走 → we go")
    assert missing == ["们", "我", "走"]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_wide_table_is_cut_into_blocks_that_repeat_the_row_labels():
    from attncli.cli.tables import column_blocks

    source = [f"word{index}" for index in range(30)]
    weights = np.full((len(OUTPUT), len(source)), 1 / len(source))
    console = Console(width=80, file=io.StringIO())
    blocks = column_blocks(heatmap_table(source, OUTPUT, weights), console)
    assert len(blocks) > 1
    shown = []
    for block in blocks:
        plain, _ = render(block)
        assert max(len(line) for line in plain.splitlines()) <= 80
        assert all(token in plain for token in OUTPUT) and "…" not in plain
        shown += [column.header.plain for column in block.columns[1:]]
    assert shown == source
