"""Rich tables that keep every label and value at any terminal width.

A table wider than the console is cut into blocks of columns, printed one under the
other; each block repeats the leading label columns (the row labels), so no label or
value is squeezed to `…`.
"""

import copy
import dataclasses

from rich.measure import Measurement
from rich.text import Text

UNBOUNDED = 1_000_000


def _width(console, table):
    """The width `table` takes when nothing in it is wrapped or cut (measured as if
    the console were unbounded: a measure within its width never exceeds it)."""
    return Measurement.get(console, console.options.update_width(UNBOUNDED), table).maximum


def _columns(table, indices, title, caption):
    """A copy of `table` with the columns at `indices`, its rows' cells with them."""
    block = copy.copy(table)
    block.columns = [dataclasses.replace(table.columns[index], _index=position,
                                         _cells=list(table.columns[index]._cells))
                     for position, index in enumerate(indices)]
    block.rows = list(table.rows)
    block.title, block.caption = title, caption
    return block


def column_blocks(table, console, keep=1):
    """`table` as a list of tables that each fit `console.width`.

    The columns after the first `keep` are dealt, in order, into blocks as wide as the
    console allows, each block led by the first `keep` columns; a block holds at
    least one column, even one wider than the console. The title goes with the
    first block, later blocks say they continue it, and the caption goes with the last.

    Returns:
        `[table]` when it fits, else the blocks.
    """
    if _width(console, table) <= console.width or len(table.columns) <= keep + 1:
        return [table]
    leading = list(range(keep))
    groups, current = [], []
    for index in range(keep, len(table.columns)):
        trial = _columns(table, leading + current + [index], None, None)
        if current and _width(console, trial) > console.width:
            groups.append(current)
            current = []
        current.append(index)
    groups.append(current)
    blocks = []
    for number, group in enumerate(groups, start=1):
        first, last = group[0] + 1 - keep, group[-1] + 1 - keep
        shown = f"column {first}" if first == last else f"columns {first}-{last}"
        title = table.title if number == 1 else Text(
            f"(continued: {shown} of {len(table.columns) - keep})"
        )
        caption = table.caption if number == len(groups) else None
        blocks.append(_columns(table, leading + group, title, caption))
    return blocks


def print_fitted(console, table, keep=1):
    """Print `table` with `column_blocks`."""
    for block in column_blocks(table, console, keep):
        console.print(block)
