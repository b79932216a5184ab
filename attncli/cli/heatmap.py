"""Attention matrices as pictures: a shaded table in the terminal, or a PNG.

Both show source tokens as columns and output tokens as rows; a cell's shade is
its attention weight, and each row's largest weight is marked.
"""

import numpy as np
from rich.table import Table
from rich.text import Text

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


def heatmap_table(source_tokens, output_tokens, weights, decimals=2, title=None,
                  row_label="output", column_label="source"):
    """A Rich table of attention weights, one row per output token.

    Args:
        source_tokens: list of str, the columns.
        output_tokens: list of str, the rows.
        weights: array `(len(output_tokens), len(source_tokens))`.
        decimals: digits printed in each cell. Defaults to 2.
        title: optional table title.
        row_label, column_label: what the rows and columns are, for the corner cell.

    Returns:
        rich.table.Table; the largest weight of each row is bold and marked `*`.
    """
    weights = _check(source_tokens, output_tokens, weights)
    table = Table(title=title, show_lines=False, pad_edge=False)
    table.add_column(f"{row_label} \\ {column_label}", style="bold")
    for token in source_tokens:
        table.add_column(Text(token), justify="right", no_wrap=True)
    for token, row in zip(output_tokens, weights):
        best = int(np.argmax(row)) if row.size else -1
        cells = []
        for position, weight in enumerate(row):
            mark = "*" if position == best else " "
            cells.append(Text(f"{weight:.{decimals}f}{mark}", style=_shade(weight)
                              + (" bold" if position == best else "")))
        table.add_row(Text(token), *cells)
    return table


def save_heatmap_png(source_tokens, output_tokens, weights, path, title=None,
                     row_label="output", column_label="source"):
    """Save the attention matrix as a labelled PNG with a colour bar.

    Source tokens (the keys) run along the top, output tokens (the queries) down the
    side, and each row's largest weight is outlined. `row_label` and `column_label`
    name the axes (a self-attention matrix has source or decoder-input tokens on
    both).
    """
    # A Figure of its own, not pyplot: no global backend is switched, no window opens.
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    weights = _check(source_tokens, output_tokens, weights)
    width = max(4.0, 0.55 * len(source_tokens) + 2.0)
    height = max(3.0, 0.45 * len(output_tokens) + 1.5)
    figure = Figure(figsize=(width, height))
    axes = figure.subplots()
    image = axes.imshow(weights, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
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
    figure.colorbar(image, ax=axes, label="attention weight")
    bottom = 0.0
    if title:
        figure.suptitle(title, y=0.01, va="bottom", fontsize="small")
        # Room under the axes for the title's lines (about 0.25 inch each).
        bottom = min(0.3, 0.25 * (title.count("\n") + 1) / height)
    figure.tight_layout(rect=(0, bottom, 1, 1))
    figure.savefig(path, dpi=120)
