"""Data: from parallel text on disk to padded batches of token ids.

`corpora` reads and splits the corpora (the bundled Tatoeba pairs, TSV, Multi30k, the
CMUdict G2P split), `tokenization` normalises text and cuts it into words, characters or
WordPiece subwords, `vocabulary` maps tokens to ids and back, and `pipeline` builds the
bucketed `tf.data` pipelines that feed training, validation and translation.
"""
