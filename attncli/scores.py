"""attncli's view of the registry of score functions and alignments (`layers.scores`).

The registry lives with the layers, each score written once with its formula, its facts
and its layer; this module adds what attncli derives from it: the types of the
configuration fields `model.score` and `model.alignment`, the scores that take a local
alignment and the names `attncli score-demo --score` takes. Nothing here imports Keras:
the configuration is checked with these names before TensorFlow loads.
"""

import typing

from layers.scores import ALIGNMENTS, SCORES, Alignment, Score, local_scores, make_attention

__all__ = ["ALIGNMENTS", "SCORES", "Alignment", "AlignmentName", "DEMO_SCORES",
           "LOCAL_SCORES", "Score", "ScoreName", "make_attention"]

# The types of the configuration fields, built from the registry so that each name is
# written once: `typing.Literal["dot", "scaled_dot", ...]`.
ScoreName = typing.Literal[tuple(SCORES)]
AlignmentName = typing.Literal[tuple(ALIGNMENTS)]

LOCAL_SCORES = local_scores()

# What `attncli score-demo --score` takes: every score function, then Luong's local
# alignments, which the demo computes on the dot score.
DEMO_SCORES = (*SCORES, *(name for name, alignment in ALIGNMENTS.items() if alignment.local))
