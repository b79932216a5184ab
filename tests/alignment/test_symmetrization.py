"""Symmetrisation against the published algorithm (Koehn, Och & Marcu 2003; Koehn's
"Statistical Machine Translation", chapter 4), on hand cases worked out on paper.

Each expected set below was written by walking the book's pseudo-code by hand: start from
the intersection; grow by neighbours (sides, then diagonals) in the union that cover a new
word, sweeping source-major until nothing changes; then `final` over the forward links and
then over the reverse ones.
"""

import pytest

from attncli.alignment.symmetrization import SYMMETRIZATIONS, symmetrize

# A 6 x 6 pair where every method gives a different answer:
#   (0,0), (5,5)  both directions: the intersection.
#   (1,1)  forward only, diagonal to (0,0), both words new: grown.
#   (3,1)  forward only, near nothing; source 3 new, target 1 aligned by (1,1): only `final`.
#   (3,3)  reverse only, near nothing; both words new when `final-and` reaches it (in
#          `final`, (3,1) covered source 3 first, but target 3 is still new): both finals.
#   (0,5)  reverse only, near nothing, both words aligned by the intersection: union only.
FORWARD = {(0, 0), (5, 5), (1, 1), (3, 1)}
REVERSE = {(0, 0), (5, 5), (0, 5), (3, 3)}
EXPECTED = {
    "intersection": {(0, 0), (5, 5)},
    "union": {(0, 0), (5, 5), (1, 1), (3, 1), (0, 5), (3, 3)},
    "grow-diag": {(0, 0), (5, 5), (1, 1)},
    "grow-diag-final": {(0, 0), (5, 5), (1, 1), (3, 1), (3, 3)},
    "grow-diag-final-and": {(0, 0), (5, 5), (1, 1), (3, 3)},
}


def test_the_registry_holds_the_five_methods():
    assert list(SYMMETRIZATIONS) == list(EXPECTED)


@pytest.mark.parametrize("method", EXPECTED)
def test_each_method_on_a_pair_that_tells_them_apart(method):
    assert symmetrize(FORWARD, REVERSE, method) == EXPECTED[method]


def test_the_hand_case_tells_every_method_apart():
    answers = [frozenset(links) for links in EXPECTED.values()]
    assert len(set(answers)) == len(answers)


@pytest.mark.parametrize("method", ["grow-diag", "grow-diag-final", "grow-diag-final-and"])
def test_growing_sweeps_again_until_nothing_changes(method):
    # From (2,2), the first sweep reaches (1,1) (a diagonal); (0,0) lies before (1,1) in
    # the sweep order, so only a second sweep adds it.
    forward = {(2, 2), (1, 1), (0, 0)}
    reverse = {(2, 2)}
    assert symmetrize(forward, reverse, method) == {(0, 0), (1, 1), (2, 2)}


@pytest.mark.parametrize("method", ["grow-diag", "grow-diag-final", "grow-diag-final-and"])
def test_a_neighbour_that_covers_no_new_word_is_not_added(method):
    # From (0,0): right (1,0) covers source 1, down (0,1) covers target 1; by the time the
    # diagonal (1,1) is tried both its words are aligned, and no final adds it either.
    forward = {(0, 0), (1, 0), (0, 1), (1, 1)}
    reverse = {(0, 0)}
    assert symmetrize(forward, reverse, method) == {(0, 0), (1, 0), (0, 1)}
    assert symmetrize(forward, reverse, "union") == forward


def test_growing_uses_side_neighbours_too():
    forward = {(0, 0), (0, 1), (2, 1)}
    reverse = {(0, 0), (1, 2)}
    # (0,1) is below (0,0) and covers target 1; (1,2) is diagonal to (0,1) and covers
    # source 1 and target 2; (2,1) is diagonal to (1,2) and covers source 2.
    assert symmetrize(forward, reverse, "grow-diag") == {(0, 0), (0, 1), (1, 2), (2, 1)}


def test_final_and_reads_the_forward_links_before_the_reverse_ones():
    # Both share source 0: whichever `final-and` reads first covers it and keeps the
    # other out; the book reads e2f (forward) first.
    assert symmetrize({(0, 1)}, {(0, 0)}, "grow-diag-final-and") == {(0, 1)}
    assert symmetrize({(0, 0)}, {(0, 1)}, "grow-diag-final-and") == {(0, 0)}
    # `final` adds the second too: its target word is still unaligned.
    assert symmetrize({(0, 1)}, {(0, 0)}, "grow-diag-final") == {(0, 0), (0, 1)}


def test_with_nothing_in_common_only_the_finals_add_links():
    forward = {(0, 0), (1, 2)}
    assert symmetrize(forward, set(), "intersection") == set()
    assert symmetrize(forward, set(), "grow-diag") == set()
    assert symmetrize(forward, set(), "grow-diag-final") == forward
    assert symmetrize(forward, set(), "grow-diag-final-and") == forward


@pytest.mark.parametrize("method", EXPECTED)
def test_no_links_in_gives_no_links_out(method):
    assert symmetrize(set(), set(), method) == frozenset()


def test_an_unknown_method_names_the_known_ones():
    with pytest.raises(ValueError, match="grow-diag-final-and"):
        symmetrize(set(), set(), "grow")


def test_mean_joins_the_weights_on_a_hand_case():
    """M = (A + B^T) / 2, A a row per target word (2 x 3), B a row per source word."""
    import numpy as np

    from attncli.alignment.extraction import Extraction
    from attncli.alignment.symmetrization import JOINED_WEIGHTS, METHODS

    forward = np.array([[0.6, 0.3, 0.1],    # target 0: source 0, but not sure
                        [0.1, 0.5, 0.4]])   # target 1: source 1 or 2
    reverse = np.array([[0.2, 0.8],         # source 0 reads target 1 (forward says 0)
                        [0.9, 0.1],         # source 1: target 0
                        [0.1, 0.9]])        # source 2: target 1
    joined = JOINED_WEIGHTS["mean"](forward, reverse)
    np.testing.assert_allclose(joined, [[0.4, 0.6, 0.1], [0.45, 0.3, 0.65]])
    # Mutual argmax over M: row 0's best is source 1 (0.6), column 1's best is row 0;
    # row 1's best is source 2 (0.65), column 2's best is row 1.
    assert Extraction("mutual-argmax").links(joined) == {(1, 0), (2, 1)}
    assert METHODS == (*SYMMETRIZATIONS, "mean")
    with pytest.raises(ValueError, match="transposed"):
        JOINED_WEIGHTS["mean"](forward, reverse.T)
