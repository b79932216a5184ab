"""The number ranges of a search and of sampling: finite, bounds included, one line."""

import math

import pytest

from attncli.config.search import Sampling, SearchConfig


@pytest.mark.parametrize(("make", "name", "low", "high", "bounds"), [
    (lambda value: SearchConfig(max_length_ratio=value), "max_length_ratio", 0, 1000,
     "[0, 1000]"),
    (lambda value: Sampling(temperature=value), "temperature", 0.001, 100.0, "[0.001, 100]"),
])
def test_a_range_takes_its_bounds_and_refuses_the_rest(make, name, low, high, bounds):
    make(low), make(high)
    for value in (math.nextafter(low, -1), math.nextafter(high, math.inf), math.nan,
                  math.inf, -math.inf):
        with pytest.raises(ValueError) as raised:
            make(value)
        assert str(raised.value) == (
            f"{name} must be a number in {bounds}. Received: {name}={value}"
        )
