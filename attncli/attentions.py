"""The attentions attncli shows, by name: one table read by the trace
(`attncli.model.trace`), the sentence views (`attncli.search.inspection`),
`inspect-weights --attention`, the server's `/step` schema and, through the views'
titles, the page. Nothing here imports Keras, so `--help` and the schemas stay light.

    name        rows × columns                  layers, heads
    cross       output tokens × source tokens   the decoder's attention over the source
    encoder     source × source                 a self-attention encoder's blocks
    decoder     output × decoder inputs         a self-attention decoder's blocks
    alignment   output tokens × source tokens   one, one (`model.alignment_layer`, the
                                                layer Garg et al. 2019 add to align)

Row t of `cross` and of `alignment` is the attention for output token t, so both have
words linked to source words (`LINKED`).
"""

#: Each attention's title, as tables, pictures and the page name it.
TITLES = {
    "cross": "cross-attention",
    "encoder": "encoder self-attention",
    "decoder": "decoder self-attention",
    "alignment": "alignment layer",
}

ATTENTIONS = tuple(TITLES)

#: The attentions whose rows are output tokens and columns source tokens: their word
#: views carry links (each target word to its heaviest source word) and gold links.
LINKED = ("cross", "alignment")

#: How a model without an alignment layer refuses one.
NO_ALIGNMENT_LAYER = ("this model has no alignment layer (docs/alignment.md says how to "
                      "add one: model.alignment_layer)")


def choices():
    """The names as a message lists them: `"cross, encoder, decoder or alignment"`."""
    return f"{', '.join(ATTENTIONS[:-1])} or {ATTENTIONS[-1]}"
