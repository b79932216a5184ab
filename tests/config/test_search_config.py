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


@pytest.mark.parametrize(
    "base, changes, expected",
    [
        # Nothing given: the run's settings as they are.
        (dict(beam_size=5, n_best=3, alpha=0.6), {}, dict(beam_size=5, n_best=3, alpha=0.6)),
        # A narrower beam than the run's n_best, without an n_best of its own: the whole beam.
        (dict(beam_size=5, n_best=3), dict(beam_size=2), dict(beam_size=2, n_best=2)),
        # A wider beam keeps the run's n_best, and an n_best given wins.
        (dict(beam_size=5, n_best=3), dict(beam_size=8), dict(beam_size=8, n_best=3)),
        (dict(beam_size=5, n_best=3), dict(beam_size=2, n_best=1), dict(beam_size=2, n_best=1)),
        # None (the whole beam) stays None whatever the beam.
        (dict(beam_size=5, n_best=None), dict(beam_size=2), dict(beam_size=2, n_best=None)),
        (dict(alpha=0.6), dict(alpha=0.0), dict(alpha=0.0)),
    ],
)
def test_adjusted_applies_the_given_settings_and_keeps_n_best_within_the_beam(
    base, changes, expected
):
    adjusted = SearchConfig(**base).adjusted(**changes)
    assert {name: getattr(adjusted, name) for name in expected} == expected
    assert adjusted.returned <= adjusted.beam_size


def test_adjusted_refuses_settings_that_do_not_go_together():
    with pytest.raises(ValueError, match="n_best=4"):
        SearchConfig(beam_size=5).adjusted(beam_size=2, n_best=4)
    with pytest.raises(ValueError, match="beam_size=0"):
        SearchConfig().adjusted(beam_size=0)
