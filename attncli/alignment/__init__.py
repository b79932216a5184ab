"""Word alignments read off attention, and how well they match human gold.

Modules follow the data flow: `links` (the Pharaoh and talp formats, the alignment error
rate), `extraction` (the attention of a given translation, `attncli.search.forced`, folded
into words and turned into links: argmax, mutual argmax, threshold), and `symmetrization`
(a forward and a reverse alignment joined: intersection, union, the grow-diag family, or
the mean of the word weights).
"""
