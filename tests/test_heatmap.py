import io

import numpy as np
import pytest
from rich.console import Console

from attncli.cli.heatmap import heatmap_table, save_heatmap_png

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
