"""The shipped configs by name, from any folder: `attncli train NAME`, `attncli configs`."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.config.schema import ConfigError
from attncli.config.shipped import describe, resolve_config, shipped_configs
from cli_errors import one_line_error

CHECKOUT_CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A current folder with no configs/ of its own, as after `pip install`."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_config_of_the_checkout_is_shipped():
    assert set(shipped_configs()) == {path.stem for path in CHECKOUT_CONFIGS.glob("*.yaml")}


@pytest.mark.parametrize("given", ["transformer", "transformer.yaml", "configs/transformer.yaml"])
def test_a_name_finds_the_shipped_config(elsewhere, given):
    found = resolve_config(given)
    assert found == shipped_configs()["transformer"]
    assert found.read_text() == (CHECKOUT_CONFIGS / "transformer.yaml").read_text()


def test_a_file_of_ones_own_comes_first(elsewhere):
    (elsewhere / "configs").mkdir()
    own = elsewhere / "configs" / "transformer.yaml"
    own.write_text("name: mine\n")
    assert resolve_config("configs/transformer.yaml") == Path("configs/transformer.yaml")


def test_a_folder_of_that_name_does_not_hide_the_shipped_config(elsewhere):
    (elsewhere / "transformer").mkdir()
    assert resolve_config("transformer") == shipped_configs()["transformer"]


@pytest.mark.parametrize("given", ["no-such-config", "elsewhere/transformer.yaml"])
def test_an_unknown_name_lists_the_shipped_ones(elsewhere, given):
    with pytest.raises(ConfigError, match="no such config file.*shipped: .*transformer"):
        resolve_config(given)


def test_train_reads_a_shipped_config_by_name(elsewhere):
    # The config is found and validated before anything is trained: the bad override
    # is reported with the shipped config's keys.
    result = CliRunner().invoke(
        app, ["train", "tiny-test", "--set", "model.no_such_key=1"], prog_name="attncli"
    )
    assert "model.no_such_key: unknown key" in one_line_error(result)
    assert not (elsewhere / "runs").exists()


def test_configs_lists_name_task_and_description(elsewhere):
    result = subprocess.run(
        [sys.executable, "-m", "attncli", "configs"], capture_output=True, text=True,
        cwd=elsewhere, check=True, env={**os.environ, "COLUMNS": "100"},
    )
    lines = result.stdout.splitlines()
    assert max(map(len, lines)) <= 100
    # A description longer than its column goes on in it, on the lines below.
    starts = [number for number, line in enumerate(lines) if not line.startswith(" ")]
    rows = {}
    for start, end in zip(starts, starts[1:] + [len(lines)]):
        name, task, description = lines[start].split(None, 2)
        below = [line.strip() for line in lines[start + 1:end]]
        rows[name] = (task, " ".join([description, *below]))
    assert list(rows) == list(shipped_configs())
    assert rows["cmudict-g2p"][0] == "pronunciation"
    assert rows["default"][0] == "translation"
    for name, path in shipped_configs().items():
        assert describe(path) and rows[name][1] == describe(path)
    assert result.stderr == ""


def test_a_description_is_the_opening_comments_whole_first_sentence():
    assert describe(shipped_configs()["hansards-en-fr"]) == (
        "English -> French on the Canadian Hansards (the NAACL 2003 word-alignment task's "
        "training text, 400,000 pairs), sized for two hours on one CPU core."
    )
    assert describe(shipped_configs()["default"]) == (
        "Spanish -> English, the bundled Tatoeba pairs, cased WordPiece, 9 minutes."
    )
