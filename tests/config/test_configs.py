"""Every shipped configuration is valid, and the bundled default is the packaged one."""

from pathlib import Path

import pytest

from attncli.config.run import default_config_path, load_run_config
from attncli.data.sources import data_paths

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def shared_data_dir():
    from shared_data import shared_data

    return shared_data("")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.name)
def test_shipped_config_is_valid_and_its_files_exist(path):
    config = load_run_config(path)
    assert config.name
    if config.data.format != "bundled":
        paths = data_paths(config.data, shared_data_dir())
        assert paths["train"] is not None


def test_default_config_is_shipped_inside_the_package():
    packaged = Path(str(default_config_path()))
    assert packaged.is_file()
    assert packaged.read_text() == (Path(__file__).resolve().parents[2] / "configs" /
                                    "default.yaml").read_text()
    config = load_run_config()
    assert config.data.format == "bundled"
    assert config.training.max_minutes is not None and config.training.max_minutes <= 10
