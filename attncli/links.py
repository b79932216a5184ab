"""Word alignment links: the Pharaoh and talp formats, and the alignment error rate.

A link `(i, j)` joins source word `i` and target word `j`, counted from 0, words being
the sentence's space-separated words.

- **Pharaoh** (fast_align, eflomal, GIZA++'s converted output, `attncli align`): one line
  per sentence pair, links `i-j` separated by spaces, 0-indexed, source first.
- **talp** (the gold files of the NAACL 2003 task and its successors): the same, but
  1-indexed; a sure link is written `i-j`, a possible one `ipj`.

Alignment error rate (Och & Ney 2003, "A systematic comparison of various statistical
alignment models"), with S the sure gold links, P the possible ones (S ⊆ P: a sure link
is also possible) and A the predicted links, each summed over the test set:

    precision = |A ∩ P| / |A|
    recall    = |A ∩ S| / |S|
    AER       = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

The sums run over sentences before the ratios are taken, as the task's scorer does.
"""

import re
from typing import NamedTuple

from attncli.errors import AttncliError

_PHARAOH_LINK = re.compile(r"(\d+)-(\d+)")
_TALP_LINK = re.compile(r"(\d+)([-p])(\d+)")


class LinkError(AttncliError):
    """A line of links that cannot be read, or that names a word past its sentence."""


class Gold(NamedTuple):
    """The gold links of one sentence pair, 0-indexed: `sure` ⊆ `possible`."""

    sure: frozenset
    possible: frozenset


def parse_pharaoh(line, where="the links"):
    """The links `{(i, j)}` of a Pharaoh line (`"0-0 1-2"`; blank: none).

    Raises:
        LinkError: a field is not `i-j` with i, j counted from 0.
    """
    links = set()
    for field in line.split():
        match = _PHARAOH_LINK.fullmatch(field)
        if match is None:
            raise LinkError(
                f"{where}: {field!r} is not a link; write source-target word positions "
                "counted from 0, as 0-1"
            )
        links.add((int(match.group(1)), int(match.group(2))))
    return frozenset(links)


def parse_talp(line, where="the gold links"):
    """The `Gold` links of a talp line (`"1-1 2p3"`: 1-indexed, `p` possible), 0-indexed.

    Raises:
        LinkError: a field is not `i-j` or `ipj` with i, j counted from 1.
    """
    sure, possible = set(), set()
    for field in line.split():
        match = _TALP_LINK.fullmatch(field)
        if match is None or int(match.group(1)) == 0 or int(match.group(3)) == 0:
            raise LinkError(
                f"{where}: {field!r} is not a gold link; write sure links as 1-2 and "
                "possible ones as 1p2, word positions counted from 1"
            )
        link = (int(match.group(1)) - 1, int(match.group(3)) - 1)
        possible.add(link)
        if match.group(2) == "-":
            sure.add(link)
    return Gold(frozenset(sure), frozenset(possible))


def format_pharaoh(links):
    """`"i-j i-j"` of `links`, sorted by source then target word."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def check_within(links, source_length, target_length, where="the links"):
    """Refuse a link to a word past the end of its sentence (one line, naming both)."""
    for i, j in sorted(links):
        if i >= source_length or j >= target_length:
            raise LinkError(
                f"{where}: link {i}-{j} (counted from 0) is past the sentence pair of "
                f"{source_length} source and {target_length} target words"
            )


class Scores(NamedTuple):
    """The counts of an alignment against gold, and the figures made of them."""

    predicted: int  # |A|
    sure: int  # |S|
    sure_hits: int  # |A ∩ S|
    possible_hits: int  # |A ∩ P|

    @property
    def precision(self):
        return self.possible_hits / self.predicted if self.predicted else 0.0

    @property
    def recall(self):
        return self.sure_hits / self.sure if self.sure else 0.0

    @property
    def aer(self):
        total = self.predicted + self.sure
        return 1.0 - (self.sure_hits + self.possible_hits) / total if total else 0.0

    def __add__(self, other):
        return Scores(*(a + b for a, b in zip(self, other)))

    def to_dict(self):
        """Counts and figures, the figures as percentages (as papers print AER)."""
        return {"aer": 100 * self.aer, "precision": 100 * self.precision,
                "recall": 100 * self.recall, **self._asdict()}


def score_sentence(links, gold):
    """The `Scores` of one sentence's predicted `links` against its `Gold`."""
    links = frozenset(links)
    return Scores(len(links), len(gold.sure), len(links & gold.sure),
                  len(links & gold.possible))


def score_corpus(predicted, golds):
    """The `Scores` of a test set: `predicted` and `golds` list one entry per pair."""
    if len(predicted) != len(golds):
        raise ValueError(f"{len(predicted)} predicted alignments for {len(golds)} gold ones")
    total = Scores(0, 0, 0, 0)
    for links, gold in zip(predicted, golds):
        total = total + score_sentence(links, gold)
    return total
