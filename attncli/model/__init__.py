"""Model: the subclassed encoder-decoder built from the attention layers of `layers/`.

`cells` holds the split GRU and LSTM cells, `recurrent` runs them over whole sequences
and `recurrence` is their time loop with a hand-written gradient; `encoder` turns source
ids into the keys and values that attention reads, `transformer_encoder` is the
self-attention encoder (with the block pieces the self-attention decoder and
`cascade_encoder` share), `decoder` holds the Bahdanau decoder (query s_{i-1}, context
into the RNN) and the Luong decoder (RNN first, h̃ = tanh(W_c[c; h]), optional input
feeding) on what `attention_decoder` holds for both, `transformer_decoder` the
self-attention decoder with its cache, `alignment_layer` an attention trained to align,
and `tied_output` the output layer tied to the embedding. `encoder_decoder` joins them
into one Keras model; `trace` chooses and labels the attention records its layers keep;
`footprint` says what a model needs in memory before it is built; `saving` writes a
trained model with its vocabularies (read back for search by `attncli.search.loading`,
exported as a SavedModel by `attncli.search.serving`). Nothing here imports
`attncli.search`.
"""
