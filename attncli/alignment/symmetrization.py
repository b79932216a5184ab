"""Symmetrisation: one alignment made of a forward and a reverse one.

Each direction of an aligner links every word of its target side to (at most) one word of
its source side, so neither alone can give a word of its target side two words. Koehn,
Och & Marcu 2003 ("Statistical phrase-based translation") join the alignment of a
source->target model (`forward`) and of a target->source model (`reverse`, already
flipped so that its links too read `(i, j)`, source word `i`, target word `j`) by
starting from the links both agree on and adding links only one of them has. The methods,
as Koehn's "Statistical Machine Translation" (2010, chapter 4) states the algorithm and
Moses's `symal` names them:

- `intersection`: `forward ∩ reverse` (high precision).
- `union`: `forward ∪ reverse` (high recall).
- `grow-diag`: start from the intersection; then, sweeping the points `(i, j)` of the
  alignment (source word `i` outer, target word `j` inner, both ascending), add each of
  the point's eight neighbours `(i ± 1, j)`, `(i, j ± 1)`, `(i ± 1, j ± 1)` (in the
  book's order: left, up, right, down, then the four diagonals) that is in the union and
  whose source word or target word is not yet aligned; sweep again until a sweep adds
  nothing. A point is added as soon as it is found, so it counts as aligned for the rest
  of the sweep (and is itself swept if it comes later in the order).
- `grow-diag-final`: `grow-diag`, then `final(forward)` and `final(reverse)`: every link
  of that direction (in the same order) whose source word OR target word is still
  unaligned is added.
- `grow-diag-final-and`: the same with `final-and`: added only when the source word AND
  the target word are both unaligned.

`SYMMETRIZATIONS` maps each name to its function `(forward, reverse) -> frozenset`.

Where both directions are attention, they can also be joined before any link is read:
`JOINED_WEIGHTS` maps a name to a function of the two word-weight matrices, and the
extraction (`attncli.alignment.extraction`) reads the links off the joined one.

- `mean`: `M = (A + Bᵀ) / 2`, `A` the forward model's word weights `(J, I)` (a row per
  target word) and `B` the reverse model's `(I, J)` (a row per source word). A link
  that both directions weigh highly stays high; one direction's confident error is
  halved. With `--extraction mutual-argmax` a link is made where `M(j, i)` is the
  largest of its row and of its column (SimAlign's rule) over the mean of both.

`METHODS` names them all.
"""

#: The neighbours of a point, in the order of Koehn's book: the four sides, then the
#: four diagonals.
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


class _Alignment:
    """A growing set of links, with which source and target words it covers."""

    def __init__(self, links):
        self.links = set(links)
        self.sources = {i for i, _ in self.links}
        self.targets = {j for _, j in self.links}

    def add(self, link):
        self.links.add(link)
        self.sources.add(link[0])
        self.targets.add(link[1])

    def covers_either(self, link):
        return link[0] in self.sources or link[1] in self.targets

    def covers_both(self, link):
        return link[0] in self.sources and link[1] in self.targets


def intersection(forward, reverse):
    """The links both directions have."""
    return frozenset(forward) & frozenset(reverse)


def union(forward, reverse):
    """The links either direction has."""
    return frozenset(forward) | frozenset(reverse)


def _grow_diag(forward, reverse):
    """The intersection grown by neighbouring union links (the module's `grow-diag`)."""
    candidates = union(forward, reverse)
    alignment = _Alignment(intersection(forward, reverse))
    if not candidates:
        return alignment
    sources = range(max(i for i, _ in candidates) + 1)
    targets = range(max(j for _, j in candidates) + 1)
    added = True
    while added:
        added = False
        for i in sources:
            for j in targets:
                if (i, j) not in alignment.links:
                    continue
                for di, dj in NEIGHBOURS:
                    neighbour = (i + di, j + dj)
                    if (neighbour in candidates and neighbour not in alignment.links
                            and not alignment.covers_both(neighbour)):
                        alignment.add(neighbour)
                        added = True
    return alignment


def grow_diag(forward, reverse):
    """`grow-diag` (see the module)."""
    return frozenset(_grow_diag(forward, reverse).links)


def _final(alignment, links, both_unaligned):
    """Add each of `links` (in source, then target order) whose words are unaligned:
    either of them (`final`), or both (`final-and`, `both_unaligned`)."""
    for link in sorted(links):
        if link in alignment.links:
            continue
        if alignment.covers_either(link) if both_unaligned else alignment.covers_both(link):
            continue
        alignment.add(link)


def grow_diag_final(forward, reverse):
    """`grow-diag-final` (see the module)."""
    alignment = _grow_diag(forward, reverse)
    _final(alignment, forward, both_unaligned=False)
    _final(alignment, reverse, both_unaligned=False)
    return frozenset(alignment.links)


def grow_diag_final_and(forward, reverse):
    """`grow-diag-final-and` (see the module)."""
    alignment = _grow_diag(forward, reverse)
    _final(alignment, forward, both_unaligned=True)
    _final(alignment, reverse, both_unaligned=True)
    return frozenset(alignment.links)


SYMMETRIZATIONS = {
    "intersection": intersection,
    "union": union,
    "grow-diag": grow_diag,
    "grow-diag-final": grow_diag_final,
    "grow-diag-final-and": grow_diag_final_and,
}


def mean_weights(forward, reverse):
    """`(A + Bᵀ) / 2` of the forward weights `A` `(J, I)` and the reverse ones `B`
    `(I, J)` (see the module)."""
    import numpy as np

    forward, reverse = np.asarray(forward), np.asarray(reverse)
    if forward.shape != reverse.shape[::-1]:
        raise ValueError(f"the reverse weights {reverse.shape} are not the forward "
                         f"weights' {forward.shape} transposed")
    return (forward + reverse.T) / 2


JOINED_WEIGHTS = {"mean": mean_weights}

#: Every way of joining the two directions: links (`SYMMETRIZATIONS`), then weights.
METHODS = (*SYMMETRIZATIONS, *JOINED_WEIGHTS)


def symmetrize(forward, reverse, method):
    """The links of `forward` and `reverse` (both `(source, target)` word pairs, counted
    from 0) joined by `method`, one of `SYMMETRIZATIONS` (see the module).

    Returns:
        frozenset of `(i, j)`.

    Raises:
        ValueError: an unknown method.
    """
    if method not in SYMMETRIZATIONS:
        raise ValueError(f"unknown symmetrization {method!r}; choose one of "
                         f"{', '.join(SYMMETRIZATIONS)}")
    return SYMMETRIZATIONS[method](forward, reverse)
