"""SearchConfig: validated when set, readable from YAML with the project's config loader."""

import pytest

from attncli.config.schema import ConfigError, from_mapping
from attncli.config.search import SearchConfig


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(beam_size=0), "beam_size=0"),
        (dict(beam_size=2, n_best=3), "n_best=3"),
        (dict(n_best=0), "n_best=0"),
        (dict(alpha=-0.1), "alpha=-0.1"),
        (dict(max_length_ratio=-1.0), "max_length_ratio=-1.0"),
        (dict(max_length_offset=0), "max_length_offset=0"),
    ],
)
def test_bad_settings_are_rejected_with_their_value(settings, message):
    with pytest.raises(ValueError, match=message):
        SearchConfig(**settings)


def test_read_from_a_yaml_mapping_with_key_paths_in_errors():
    config = from_mapping(SearchConfig, {"beam_size": 4, "n_best": None}, "search")
    assert config.to_dict() == {
        "beam_size": 4, "alpha": 0.6, "n_best": None,
        "max_length_ratio": 2.0, "max_length_offset": 10,
    }
    with pytest.raises(ConfigError, match="search.beam: unknown key"):
        from_mapping(SearchConfig, {"beam": 4}, "search")
    with pytest.raises(ConfigError, match=r"search: n_best must be in \[1, beam_size=2\]"):
        from_mapping(SearchConfig, {"beam_size": 2, "n_best": 3}, "search")


def test_n_best_is_one_unless_set_whatever_the_beam():
    assert SearchConfig(beam_size=4).returned == 1
    assert SearchConfig(beam_size=4, n_best=None).returned == 4
    assert SearchConfig(beam_size=4, n_best=2).returned == 2
