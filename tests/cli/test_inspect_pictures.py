"""`attncli inspect-weights --input FILE --png-dir DIR`: one picture per sentence, on a copy
of the small trained run of `tests/fixtures/run-0.1.0`; its bad option values, one line
and exit code 2; the note naming glyphs no installed font has; `--png` into a new folder;
the tables at 80 columns.
"""


import pytest
from attncli_process import attncli, fixture_run
from cli_errors import one_line_error
from rich.cells import cell_len
from typer.testing import CliRunner

from attncli.cli import fonts
from attncli.cli.app import app

SENTENCES = ["Tengo hambre.", "¿Dónde está el baño?", "", "Tom no vino.", "Hace frío hoy.",
             "Me gusta leer.", "Ellos no quieren ir a la escuela mañana por la tarde.",
             "Hola.", "Estoy cansado.", "¿Qué hora es?", "Gracias."]
PNG = b"\x89PNG\r\n\x1a\n"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return fixture_run(tmp_path_factory.mktemp("pictures"))


def invoke(*args):
    return CliRunner().invoke(app, [str(arg) for arg in args])


def test_one_picture_per_sentence_named_by_line(run, tmp_path):
    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(SENTENCES) + "\n", "utf-8")
    pictures = tmp_path / "pictures"
    # In this process (the refusal below is a subprocess), piped as a subprocess's
    # output is: no COLUMNS or LINES.
    result = CliRunner().invoke(app, ["inspect-weights", str(run), "--input", str(source),
                                      "--png-dir", str(pictures), "--cell-weights",
                                      "--decimals", "2"], env={"COLUMNS": None, "LINES": None})
    assert result.exit_code == 0, result.output
    # 11 lines: two digits; the empty third line has no picture.
    expected = [f"{number:02d}.png" for number in range(1, 12) if number != 3]
    assert sorted(path.name for path in pictures.iterdir()) == expected
    for name in expected:
        assert (pictures / name).read_bytes()[:8] == PNG
    saved = [line for line in result.stdout.splitlines() if line.startswith("saved ")]
    assert saved == [f"saved {pictures / name}" for name in expected]
    assert result.stdout.count("  →  ") == len(expected)


def test_png_with_input_is_one_line_error(run, tmp_path):
    source = tmp_path / "sentences.txt"
    source.write_text("Hola.\n", "utf-8")
    result = attncli("inspect-weights", run, "--input", source, "--png", tmp_path / "a.png",
                     cwd=tmp_path, check=False)
    assert "--png-dir" in one_line_error(result)
    assert not (tmp_path / "a.png").exists()


@pytest.mark.parametrize("arguments, message", [
    (["--text", "Hola.", "--input", "IN"], "not both"),
    (["--text", "Hola.", "--png", "a.png", "--png-dir", "DIR"], "not both"),
    (["--input", "IN", "--step", "1"], "--step walks one sentence"),
    (["--text", "Hola.", "--cell-weights"], "add --png FILE or --png-dir DIR"),
    (["--input", "IN", "--png-dir", "FILE"], "is a file"),
    (["--input", "IN", "--png-dir", "NOWHERE/pictures"], "no such folder"),
    (["--input", "MISSING"], "no such file"),
    (["--input", "EMPTY"], "has no sentence"),
    (["--png-dir", "DIR"], "need the sentence"),
])
def test_bad_values_are_one_line_errors(run, tmp_path, arguments, message):
    (tmp_path / "in.txt").write_text("Hola.\n", "utf-8")
    (tmp_path / "empty.txt").write_text("\n \n", "utf-8")
    (tmp_path / "file").write_text("", "utf-8")
    names = {"IN": tmp_path / "in.txt", "EMPTY": tmp_path / "empty.txt",
             "FILE": tmp_path / "file", "DIR": tmp_path / "pictures",
             "MISSING": tmp_path / "missing.txt", "NOWHERE/pictures": tmp_path / "x" / "y"}
    result = invoke("inspect-weights", run, *[names.get(arg, arg) for arg in arguments])
    assert message in one_line_error(result)
    assert not (tmp_path / "pictures").exists()


def test_glyphs_no_font_has_are_named_in_one_note(run, tmp_path, monkeypatch):
    monkeypatch.setattr(fonts, "_installed_fonts", lambda: [])
    picture = tmp_path / "cmn.png"
    result = invoke("inspect-weights", run, "--text", "我们走。", "--png", picture)
    assert result.exit_code == 0, result.stderr
    assert picture.read_bytes()[:8] == PNG
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "们 我 走" in notes[0]
    assert "Glyph" not in result.stderr  # matplotlib's own warnings, one per glyph, are not shown


def test_png_creates_its_missing_folder_as_png_dir_does(run, tmp_path):
    picture = tmp_path / "pictures" / "hola.png"
    result = invoke("inspect-weights", run, "--text", "Hola.", "--png", picture)
    assert result.exit_code == 0, result.output
    assert picture.read_bytes()[:8] == PNG
    farther = tmp_path / "x" / "y" / "hola.png"
    message = one_line_error(invoke("inspect-weights", run, "--text", "Hola.", "--png", farther))
    assert f"no such folder {tmp_path / 'x'}" in message
    assert not (tmp_path / "x").exists()


LONG = "Ellos no quieren ir a la escuela mañana por la tarde porque tienen mucho frío."


def test_wide_tables_are_cut_into_blocks_of_columns_at_80_columns(run):
    """At 80 columns every source token, output token and weight of the matrix and of
    the step table is printed: the columns go into blocks that repeat the row labels."""
    result = CliRunner().invoke(
        app, ["inspect-weights", str(run), "--text", LONG, "--step", "2", "--decimals", "4"],
        env={"COLUMNS": "80"},
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert max(cell_len(line) for line in out.splitlines()) <= 80
    assert "…]" not in out.replace(", …]", "") and "… " not in out.replace(", … ", "")
    assert "(continued: " in out
    table = out[: out.index("output token 2 ")]
    headers = [cells for line in table.splitlines() if line.startswith("┃")
               for cells in [[cell.strip() for cell in line.split("┃")[1:-1]]]]
    source_tokens = [token for cells in headers for token in cells[1:]]
    rows = {line.split("│")[1].strip() for line in table.splitlines()
            if line.startswith("│")}
    # Each block's rows carry the output tokens, and its cells four decimals.
    assert len(headers) >= 2 and all(cells[0] == "output \\ source" for cells in headers)
    assert "escuela" in source_tokens and "frío" in source_tokens
    assert len(rows) >= 2
    step = out[out.index("output token 2 "):]
    assert "4. sum" in step and "context [" in step and "1. score" in step
