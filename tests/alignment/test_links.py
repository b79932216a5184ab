"""The Pharaoh and talp formats and the alignment error rate, against counts worked out by
hand from Och & Ney 2003's definition."""

import pytest

from attncli.links import (
    Gold, LinkError, Scores, check_within, format_pharaoh, parse_pharaoh, parse_talp,
    score_corpus, score_sentence,
)


def test_pharaoh_links_are_read_and_written_counted_from_zero():
    assert parse_pharaoh("0-0 2-1  1-2\n") == {(0, 0), (2, 1), (1, 2)}
    assert parse_pharaoh("") == frozenset()
    assert format_pharaoh({(2, 1), (0, 0), (1, 2)}) == "0-0 1-2 2-1"


def test_talp_links_are_counted_from_one_and_sure_links_are_possible():
    gold = parse_talp("1-1 2p3 3-2")
    assert gold.sure == {(0, 0), (2, 1)}
    assert gold.possible == {(0, 0), (1, 2), (2, 1)}


@pytest.mark.parametrize("field", ["1:2", "1-", "a-1", "1-2-3", "1p", "-1-2"])
def test_a_malformed_link_is_named(field):
    with pytest.raises(LinkError, match=f"line 7: {field!r} is not a link"):
        parse_pharaoh(f"0-0 {field}", where="line 7")
    with pytest.raises(LinkError, match=f"line 7: {field!r} is not a gold link"):
        parse_talp(f"1-1 {field}", where="line 7")


@pytest.mark.parametrize("field", ["0-1", "1-0", "0p1", "00-1", "1p00"])
def test_a_gold_word_numbered_zero_is_refused(field):
    with pytest.raises(LinkError, match="counted from 1"):
        parse_talp(field)


def test_a_link_past_its_sentence_is_refused():
    check_within({(0, 0), (2, 3)}, 3, 4)
    with pytest.raises(LinkError, match=r"gold line 2: link 3-0 \(counted from 0\) is past "
                                        "the sentence pair of 3 source and 4 target words"):
        check_within({(3, 0)}, 3, 4, where="gold line 2")
    with pytest.raises(LinkError, match="link 0-4"):
        check_within({(0, 4)}, 3, 4)


def test_aer_precision_and_recall_of_a_hand_case():
    # S = {(0,0), (1,1)}, P = S + {(1,2), (2,2)}, A = {(0,0), (1,2), (2,1)}:
    # |A| = 3, |S| = 2, |A ∩ S| = 1 (0-0), |A ∩ P| = 2 (0-0, 1-2).
    gold = Gold(frozenset({(0, 0), (1, 1)}), frozenset({(0, 0), (1, 1), (1, 2), (2, 2)}))
    scores = score_sentence({(0, 0), (1, 2), (2, 1)}, gold)
    assert scores == Scores(predicted=3, sure=2, sure_hits=1, possible_hits=2)
    assert scores.precision == pytest.approx(2 / 3)
    assert scores.recall == pytest.approx(1 / 2)
    assert scores.aer == pytest.approx(1 - (1 + 2) / (3 + 2))
    assert scores.to_dict()["aer"] == pytest.approx(40.0)


def test_a_perfect_alignment_scores_zero_and_an_empty_one_one():
    gold = parse_talp("1-1 2-2 2p3")
    assert score_sentence({(0, 0), (1, 1)}, gold).aer == 0.0
    # Possible links cost nothing and gain nothing when the sure ones are all found.
    assert score_sentence({(0, 0), (1, 1), (1, 2)}, gold).aer == 0.0
    assert score_sentence(set(), gold).aer == 1.0


def test_the_corpus_sums_counts_before_it_divides():
    golds = [parse_talp("1-1"), parse_talp("1-1 2-2 3-3 4-4")]
    predicted = [{(0, 0)}, {(0, 0), (3, 1)}]
    # Sentence AERs 0 and 1 - 2/6; the corpus: |A| 3, |S| 5, |A∩S| 2, |A∩P| 2.
    total = score_corpus(predicted, golds)
    assert total == Scores(3, 5, 2, 2)
    assert total.aer == pytest.approx(1 - 4 / 8)
    with pytest.raises(ValueError, match="1 predicted alignments for 2 gold ones"):
        score_corpus(predicted[:1], golds)
