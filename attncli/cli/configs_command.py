"""`attncli configs`: the shipped run configurations, one line each."""

import shutil
import textwrap

import typer

from attncli.config.run import load_run_config
from attncli.config.shipped import describe, shipped_configs


def command():
    """List the shipped run configurations: attncli train NAME trains one."""
    shipped = shipped_configs()
    rows = [(name, load_run_config(path).data.task, describe(path))
            for name, path in shipped.items()]
    widths = [max(len(row[column]) for row in rows) for column in (0, 1)]
    # Descriptions are wrapped into their column at the terminal's width, never cut.
    indent = widths[0] + widths[1] + 4
    room = max(shutil.get_terminal_size().columns - indent, 20)
    for name, task, description in rows:
        first, *rest = textwrap.wrap(description, room) or [""]
        typer.echo(f"{name:<{widths[0]}}  {task:<{widths[1]}}  {first}".rstrip())
        for line in rest:
            typer.echo(" " * indent + line)
