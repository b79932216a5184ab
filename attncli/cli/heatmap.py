"""Attention matrices as pictures: a shaded table in the terminal, or a PNG.

Both show source tokens as columns and output tokens as rows; a cell's shade is
its attention weight, and each row's largest weight is marked. Given cells of links
(`links`: the extracted word links, `sure` and `possible`: gold ones) are marked too,
each kind its own way, with a legend.

matplotlib is imported where a picture is drawn, not here: `attncli --help` imports this
module (through the commands that draw), and matplotlib alone would slow it down.
"""

import io
import textwrap
import warnings

import numpy as np
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from attncli.cli.fonts import font_families
from attncli.files import write_atomically

# From white (weight 0) to a deep blue (weight 1); readable on dark and light terminals.
_LOW = np.array([255, 255, 255])
_HIGH = np.array([8, 48, 107])


def _check(source_tokens, output_tokens, weights):
    weights = np.asarray(weights, dtype="float64")
    expected = (len(output_tokens), len(source_tokens))
    if weights.shape != expected:
        raise ValueError(
            f"weights have shape {weights.shape}, expected (outputs, sources) = {expected}"
        )
    return weights


def _shade(weight):
    weight = float(np.clip(weight, 0.0, 1.0))
    red, green, blue = (_LOW + (_HIGH - _LOW) * weight).round().astype(int)
    ink = "black" if weight < 0.5 else "white"
    return f"{ink} on rgb({red},{green},{blue})"


#: The marks of a table's cells, and what the legend says of each.
LINK_MARK, SURE_MARK, POSSIBLE_MARK = "+", "S", "P"
_LEGEND = {
    "best": "* the row's largest weight",
    "links": f"{LINK_MARK} a link (argmax of the word weights per target word)",
    "sure": f"{SURE_MARK} a sure gold link",
    "possible": f"{POSSIBLE_MARK} a possible one",
}


def legend(links=(), sure=(), possible=()):
    """What the marks of a table mean, the row's largest weight first; only the kinds
    of links given are named."""
    given = {"links": links, "sure": sure, "possible": possible}
    return "; ".join(text for name, text in _LEGEND.items()
                     if name == "best" or given[name])


def heatmap_table(source_tokens, output_tokens, weights, decimals=2, title=None,
                  row_label="output", column_label="source", links=frozenset(),
                  sure=frozenset(), possible=frozenset()):
    """A Rich table of attention weights, one row per output token.

    Args:
        source_tokens: list of str, the columns.
        output_tokens: list of str, the rows.
        weights: array `(len(output_tokens), len(source_tokens))`.
        decimals: digits printed in each cell. Defaults to 2.
        title: optional table title.
        row_label, column_label: what the rows and columns are, for the corner cell.
        links, sure, possible: sets of cells `(row, column)`: the extracted links,
            the sure and the possible gold links. Default: none.

    Returns:
        rich.table.Table; the largest weight of each row is bold and marked `*`, a
        link `+`, a sure gold link `S` and a possible one `P`, and when any link is
        given a caption says so.
    """
    weights = _check(source_tokens, output_tokens, weights)
    table = Table(title=title, show_lines=False, pad_edge=False)
    if links or sure or possible:
        table.caption = legend(links, sure, possible)
    table.add_column(f"{row_label} \\ {column_label}", style="bold")
    # A cell is padded on the left to its column's width and set flush left: Rich drops
    # the trailing spaces of a cell set flush right, and the digits would not line up.
    length = len(f"{0:.{decimals}f}*") + bool(links) + bool(sure or possible)
    widths = [max(length, cell_len(token)) for token in source_tokens]
    for token in source_tokens:
        table.add_column(Text(token, justify="right"), justify="left", no_wrap=True)
    for row_index, (token, row) in enumerate(zip(output_tokens, weights)):
        best = int(np.argmax(row)) if row.size else -1
        cells = []
        for position, weight in enumerate(row):
            cell = (row_index, position)
            mark = "*" if position == best else " "
            # One place for each kind of mark the table has, so the digits line up.
            marks = ((LINK_MARK if cell in links else " ") if links else "") + (
                (SURE_MARK if cell in sure else POSSIBLE_MARK if cell in possible else " ")
                if sure or possible else "")
            cells.append(Text(f"{weight:.{decimals}f}{mark}{marks}".rjust(widths[position]),
                              style=_shade(weight) + (" bold" if position == best else "")))
        table.add_row(Text(token), *cells)
    return table


# Inches per cell, and the smallest picture.
_CELL_WIDTH, _CELL_HEIGHT = 0.55, 0.45
_MIN_WIDTH, _MIN_HEIGHT = 4.0, 3.0
_DPI = 120


def heatmap_figure(source_tokens, output_tokens, weights, title=None, row_label="output",
                   column_label="source", cell_decimals=None, families=None,
                   links=frozenset(), sure=frozenset(), possible=frozenset()):
    """The attention matrix as a matplotlib `Figure` (on an Agg canvas, no pyplot).

    Source tokens (the keys) run along the top, output tokens (the queries) down the
    side, and each row's largest weight is outlined; a colour bar on the right. A link
    is a pink dot in its cell's corner, a sure gold link a green square inside the
    cell, a possible one a dashed green square, with a legend under the matrix. The
    caption `title` goes under everything, each line wrapped to the picture's width,
    in room of its own (constrained layout), so it never covers a row or the colour
    bar. The picture is sized so that a cell keeps about 0.55 x 0.45 inch whatever the
    labels and the caption take.

    Args:
        source_tokens, output_tokens: the column and row labels.
        weights: array `(len(output_tokens), len(source_tokens))`.
        title: the caption, or None.
        row_label, column_label: what the rows and columns are (a self-attention matrix
            has source or decoder-input tokens on both).
        cell_decimals: None, or print each weight in its cell with that many digits.
        families: font families for the labels (see `attncli.cli.fonts`). Defaults to
            matplotlib's.
        links, sure, possible: sets of cells `(row, column)`: the extracted links, the
            sure and the possible gold links. Default: none.
    """
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    weights = _check(source_tokens, output_tokens, weights)
    cell_width = _CELL_WIDTH
    if cell_decimals is not None:  # room for "0.123" in 8 points
        cell_width = max(_CELL_WIDTH, 0.07 * (cell_decimals + 2) + 0.2)
    # At least 1.5 inch high, so that the colour bar has room for its label.
    cells = (cell_width * len(source_tokens), max(1.5, _CELL_HEIGHT * len(output_tokens)))
    with rc_context({"font.family": families} if families else {}):
        figure = Figure(figsize=(max(_MIN_WIDTH, cells[0] + 2.5),
                                 max(_MIN_HEIGHT, cells[1] + 2.0)),
                        dpi=_DPI, layout="constrained")
        figure.get_layout_engine().set(w_pad=0.1, h_pad=0.1)
        FigureCanvasAgg(figure)
        axes = figure.subplots()
        image = axes.imshow(weights, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
        if max(map(len, source_tokens), default=0) <= 2:  # Han characters, marks: upright
            axes.set_xticks(range(len(source_tokens)), labels=source_tokens)
        else:
            axes.set_xticks(range(len(source_tokens)), labels=source_tokens, rotation=60,
                            ha="left", rotation_mode="anchor")
        axes.set_yticks(range(len(output_tokens)), labels=output_tokens)
        axes.xaxis.tick_top()
        axes.set_xlabel(column_label)
        axes.xaxis.set_label_position("top")
        axes.set_ylabel(row_label)
        for row, values in enumerate(weights):
            if values.size:
                column = int(np.argmax(values))
                axes.add_patch(Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False,
                                         edgecolor="darkorange", linewidth=1.5))
            if cell_decimals is not None:
                for column, weight in enumerate(values):
                    axes.text(column, row, f"{weight:.{cell_decimals}f}", ha="center",
                              va="center", fontsize=8,
                              color="white" if weight > 0.6 else "black")
        _mark_links(axes, links, sure, possible)
        figure.colorbar(image, ax=axes, label="attention weight")
        caption = figure.supxlabel("", fontsize="small") if title else None
        _fit(figure, axes, caption, title, cells)
    return figure


_LINK = dict(marker="o", markersize=6, color="#e7298a", markeredgecolor="white",
             markeredgewidth=1.0, linestyle="none")
_GOLD = dict(fill=False, edgecolor="#1b9e4b", linewidth=2.0)


def _mark_links(axes, links, sure, possible):
    """Draw the links and gold links on their cells, and their legend above the axes."""
    from matplotlib import patheffects
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    for row, column in sorted(links):
        axes.plot(column - 0.3, row - 0.28, scalex=False, scaley=False, **_LINK)
    # A white edge keeps the green readable on the darkest blues.
    ringed = [patheffects.Stroke(linewidth=4, foreground="white"), patheffects.Normal()]
    for cells, style in ((sure, "solid"), (possible, (0, (2, 1.5)))):
        for row, column in sorted(cells):
            axes.add_patch(Rectangle((column - 0.32, row - 0.32), 0.64, 0.64,
                                     linestyle=style, path_effects=ringed, **_GOLD))
    if not (links or sure or possible):
        return
    handles = [Rectangle((0, 0), 1, 1, fill=False, edgecolor="darkorange", linewidth=1.5)]
    labels = ["the row's largest weight"]
    if links:
        handles.append(Line2D([], [], **_LINK))
        labels.append("link (argmax per target word)")
    if sure:
        handles.append(Rectangle((0, 0), 1, 1, **_GOLD))
        labels.append("sure gold link")
    if possible:
        handles.append(Rectangle((0, 0), 1, 1, linestyle=(0, (2, 1.5)), **_GOLD))
        labels.append("possible gold link")
    # Above everything: the caption holds the bottom, and constrained layout keeps room
    # for both.
    axes.figure.legend(handles, labels, loc="outside upper center", ncols=2,
                       fontsize="small", frameon=False)


def _fit(figure, axes, caption, title, cells):
    """Wrap the caption to the picture's width and size the picture so that the axes
    get `cells` (inches): the labels, colour bar and caption take what they take."""
    renderer = figure.canvas.get_renderer()
    for _ in range(4):
        if caption is not None:
            caption.set_text(_wrapped(title, caption, renderer,
                                      0.95 * figure.get_figwidth() * figure.dpi))
        figure.draw_without_rendering()
        box = axes.get_position()
        width, height = figure.get_size_inches()
        around = (width * (1 - box.width), height * (1 - box.height))
        wanted = (max(_MIN_WIDTH, cells[0] + around[0]), max(_MIN_HEIGHT, cells[1] + around[1]))
        if abs(wanted[0] - width) < 0.02 and abs(wanted[1] - height) < 0.02:
            return
        figure.set_size_inches(*wanted)


def _wrapped(title, caption, renderer, width):
    """`title` with each line wrapped (at spaces, or anywhere in a long word) to at
    most `width` pixels in the caption's font."""
    lines = []
    for line in title.split("\n"):
        columns = len(line)
        while True:
            pieces = textwrap.wrap(line, columns) or [""]
            caption.set_text("\n".join(pieces))
            if columns <= 8 or caption.get_window_extent(renderer).width <= width:
                break
            columns = max(8, int(columns * 0.9))
        lines.extend(pieces)
    return "\n".join(lines)


def heatmap_png(source_tokens, output_tokens, weights, title=None, row_label="output",
                column_label="source", cell_decimals=None, links=frozenset(),
                sure=frozenset(), possible=frozenset()):
    """The attention matrix as a labelled PNG (`heatmap_figure`), in memory.

    Labels in scripts matplotlib's default font lacks (Han, Kana, Hangul, ...) are drawn
    with an installed font that has them (`attncli.cli.fonts`).

    Returns:
        `(png, missing)`: the PNG file's bytes, and the sorted characters no installed
        font has (drawn as boxes), for the caller to report; empty when every label
        rendered.
    """
    texts = [*source_tokens, *output_tokens, title or "", row_label, column_label]
    families, missing = font_families(texts)
    with warnings.catch_warnings():
        # One notice from the caller names every missing glyph; not one warning per glyph.
        warnings.filterwarnings("ignore", message="Glyph .* missing from")
        figure = heatmap_figure(source_tokens, output_tokens, weights, title, row_label,
                                column_label, cell_decimals, families, links, sure,
                                possible)
        data = io.BytesIO()
        figure.savefig(data, format="png", dpi=_DPI)
    return data.getvalue(), missing


def save_heatmap_png(source_tokens, output_tokens, weights, path, title=None,
                     row_label="output", column_label="source", cell_decimals=None,
                     links=frozenset(), sure=frozenset(), possible=frozenset()):
    """Save the attention matrix as a labelled PNG (`heatmap_png`), written atomically.

    Returns:
        The sorted characters no installed font has (drawn as boxes), for the caller to
        report; empty when every label rendered.
    """
    png, missing = heatmap_png(source_tokens, output_tokens, weights, title, row_label,
                               column_label, cell_decimals, links, sure, possible)
    write_atomically(path, png)
    return missing
