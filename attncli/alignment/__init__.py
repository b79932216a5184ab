"""Word alignments read off attention, and how well they match human gold.

Modules follow the data flow: `extraction` (the attention of a given translation,
`attncli.search.forced`, folded into words and turned into links: argmax, mutual argmax,
threshold), and `symmetrization` (a forward and a reverse alignment joined: intersection,
union, the grow-diag family, or the mean of the word weights). The Pharaoh and talp
formats and the alignment error rate are `attncli.links`, at the top, which the data and
search floors read too.
"""
