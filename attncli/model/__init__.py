"""Model: the subclassed encoder-decoder built from the attention layers of `layers/`.

`recurrent` holds the cells, `encoder` turns source ids into the keys and values that
attention reads, `decoder` holds the Bahdanau decoder (query s_{i-1}, context into the
RNN) and the Luong decoder (RNN first, h̃ = tanh(W_c[c; h]), optional input feeding),
`encoder_decoder` joins them into one Keras model, and `saving` writes a trained model
with its vocabularies (read back for search by `attncli.search.loading`, exported as a
SavedModel by `attncli.search.serving`). Nothing here imports `attncli.search`.
"""
