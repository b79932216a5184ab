"""Word alignments read off attention, and how well they match human gold.

Modules follow the data flow: `links` (the Pharaoh and talp formats, the alignment error
rate), then the attention of a given translation (`attncli.search.forced`) folded into
words and turned into links.
"""
