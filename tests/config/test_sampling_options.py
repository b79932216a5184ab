"""One statement of sampling's rules, `requested_sampling`, serves the command line and the
server; each names the options as its user wrote them, in one line."""

import pytest

from attncli.cli.runs import SAMPLING_OPTIONS as CLI
from attncli.config.search import (
    Decoding, Sampling, SearchConfig, SearchSettingError, requested_decoding,
    requested_sampling,
)
from attncli.serve.served_model import SAMPLING_OPTIONS as SERVER

ASK = {"sampling": None, "temperature": None, "seed": None, "beam": None, "n_best": None}


@pytest.mark.parametrize(("given", "cli", "server"), [
    ({"temperature": 0.5},
     "--temperature applies to sampling: add --sampling random (or topk:K, topp:P), or drop it",
     'temperature applies to sampling: add "sampling": "random" (or "topk:K", "topp:P"), or '
     "drop it"),
    ({"seed": 3}, "--seed applies to sampling", "seed applies to sampling"),
    ({"sampling": "random", "beam": 3},
     "--beam 3 and --sampling: sampling draws each translation on its own, without a beam; "
     "drop --beam (--n-best N draws N translations per line)",
     "beam 3 and sampling: sampling draws each translation on its own, without a beam; "
     "drop beam (n_best N draws N translations per text)"),
    ({"sampling": "random", "seed": -1},
     "--seed must be in [0, 2**63 - 1]. Received: --seed=-1",
     "seed must be in [0, 2**63 - 1]. Received: seed=-1"),
    ({"sampling": "random", "n_best": 101},
     "--sampling: --n-best must be in [1, 100]. Received: --n-best=101",
     "n_best must be in [1, 100]. Received: n_best=101"),
    ({"sampling": "random", "temperature": 0.0},
     "--sampling: --temperature must be a number in [0.001, 100]. Received: --temperature=0.0",
     "temperature must be a number in [0.001, 100]. Received: temperature=0.0"),
    ({"sampling": "top5"},
     "--sampling: sampling is random, topk:K (K an integer >= 1) or topp:P (P in (0, 1]). "
     "Received: top5",
     "sampling is random, topk:K (K an integer >= 1) or topp:P (P in (0, 1]). Received: top5"),
])
def test_each_front_end_names_its_own_options(given, cli, server):
    for options, expected in ((CLI, cli), (SERVER, server)):
        with pytest.raises(ValueError) as raised:
            requested_sampling(options, **{**ASK, **given})
        message = str(raised.value)
        assert message.startswith(expected) and "\n" not in message


@pytest.mark.parametrize("options", [CLI, SERVER])
def test_what_is_asked_for_is_drawn(options):
    assert requested_sampling(options, **ASK) is None
    assert requested_sampling(options, **{**ASK, "beam": 4}) is None
    assert requested_sampling(
        options, **{**ASK, "sampling": "topk:5", "temperature": 0.7, "n_best": 3, "beam": 1,
                    "seed": 2**63 - 1},
    ) == Sampling("topk", top_k=5, temperature=0.7, samples=3)
    assert requested_sampling(options, **{**ASK, "sampling": "random"}) == Sampling()


RUN_SEARCH = SearchConfig(beam_size=4, alpha=0.8, n_best=2, max_length_ratio=1.5)


def test_a_request_without_sampling_is_the_runs_search_adjusted():
    decoding = requested_decoding(RUN_SEARCH, CLI, beam=3, n_best=3, prefix="Tom")
    assert decoding == Decoding(SearchConfig(beam_size=3, alpha=0.8, n_best=3,
                                             max_length_ratio=1.5), None, "Tom", 0)
    assert requested_decoding(RUN_SEARCH, SERVER) == Decoding(RUN_SEARCH)
    assert decoding.returned == 3 and decoding.to_dict()["prefix"] == "Tom"


def test_a_request_with_sampling_draws_n_best_from_a_greedy_search():
    decoding = requested_decoding(RUN_SEARCH, SERVER, alpha=0.2, n_best=5, sampling="topk:7",
                                  temperature=0.5, seed=11)
    assert decoding.search == SearchConfig(beam_size=1, alpha=0.2, n_best=1,
                                           max_length_ratio=1.5)
    assert decoding.sampling == Sampling("topk", top_k=7, temperature=0.5, samples=5)
    assert (decoding.prefix, decoding.seed, decoding.returned) == ("", 11, 5)
    assert decoding.to_dict()["seed"] == 11


def test_search_settings_that_do_not_go_together_are_told_apart_from_sampling_errors():
    with pytest.raises(SearchSettingError, match=r"n_best must be in \[1, beam_size=2\]"):
        requested_decoding(RUN_SEARCH, CLI, beam=2, n_best=3)
    with pytest.raises(ValueError, match="--seed applies to sampling") as error:
        requested_decoding(RUN_SEARCH, CLI, seed=3)
    assert not isinstance(error.value, SearchSettingError)


def test_a_decoding_of_a_search_or_nothing():
    assert Decoding.of(None) == Decoding() == Decoding(SearchConfig())
    assert Decoding.of(RUN_SEARCH) == Decoding(RUN_SEARCH)
    asked = Decoding(RUN_SEARCH, prefix="x")
    assert Decoding.of(asked) is asked
    assert len({asked, Decoding(RUN_SEARCH, prefix="x")}) == 1  # hashable, by value
