"""The model shipped inside the package as `demo` (configs/demo.yaml, docs/results.md):
found by name by every command that takes a RUN, complete, loaded, translating and
inspected, and part of the wheel."""

import tomllib
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.cli.runs import model_directory, shipped_models
from attncli.errors import AttncliError
from attncli.model.saving import missing_model_file, read_model_config

REPO = Path(__file__).resolve().parents[2]
PACKAGED = Path(str(resources.files("attncli"))) / "resources" / "models" / "demo"


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A current directory with no file or folder named `demo`."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_demo_names_the_model_inside_the_package(elsewhere):
    assert shipped_models() == {"demo": PACKAGED}
    assert model_directory("demo") == PACKAGED
    assert model_directory(Path("demo")) == PACKAGED


def test_a_folder_named_demo_comes_first(elsewhere):
    (elsewhere / "demo").mkdir()
    (elsewhere / "demo" / "config.json").write_text("{}")
    assert model_directory("demo") == Path("demo")


def test_a_folder_named_demo_that_is_no_run_says_how_to_reach_the_shipped_one(elsewhere):
    (elsewhere / "demo").mkdir()
    with pytest.raises(AttncliError, match="the model shipped as 'demo' is used only when no "
                                           "file or folder 'demo' is in the current directory"):
        model_directory("demo")


def test_a_path_ending_in_demo_is_no_name(elsewhere):
    with pytest.raises(AttncliError, match="no such run directory"):
        model_directory(elsewhere / "demo")


def test_the_packaged_model_is_complete_and_small():
    assert missing_model_file(PACKAGED) is None
    model = read_model_config(PACKAGED)["model"]
    assert model.units <= 256 and model.embedding_dim <= 256
    assert sum(path.stat().st_size for path in PACKAGED.iterdir()) < 13 * 2**20


def test_the_wheel_takes_every_file_of_the_packaged_model():
    # setuptools globs each package-data pattern below the package, `*` within one folder.
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))[
        "tool"]["setuptools"]["package-data"]["attncli"]
    package = REPO / "attncli"
    taken = {path for pattern in patterns for path in package.glob(pattern)}
    files = [package / "resources" / "models" / "demo" / path.name
             for path in PACKAGED.iterdir()]
    assert files and set(files) <= taken


@pytest.mark.slow
def test_translate_demo(elsewhere):
    result = CliRunner().invoke(app, ["translate", "demo", "Tengo hambre."])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "I'm hungry.\n"


@pytest.mark.slow
def test_inspect_weights_demo(elsewhere):
    result = CliRunner().invoke(app, ["inspect-weights", "demo", "--text",
                                      "¿Dónde está el baño?", "--decimals", "2"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("¿Dónde está el baño?  →  Where is the bathroom?\n")
    assert "│[END]" in result.stdout


def test_the_help_of_translate_names_demo_and_its_bleu():
    result = CliRunner().invoke(app, ["translate", "--help"], env={"COLUMNS": "200"})
    assert "or demo: the Spanish → English model shipped with attncli (cased BLEU 43.33" in (
        " ".join(result.stdout.replace("│", " ").split()))
