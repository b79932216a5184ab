"""Data: from parallel text on disk to padded batches of token ids.

`sources` finds the files a run's `data:` section names and reads its corpus, split into
train, validation and test by `corpora` (the bundled Tatoeba pairs, TSV, Multi30k, the
CMUdict G2P split; `readers` reads the lines). `tokenization` holds the `Tokenizer`,
which normalises text and hands it to the class of its level (`levels`: characters,
words, WordPiece subwords learned by `wordpiece`, pieces given; `sentencepiece_level`);
`vocabulary` maps tokens to ids and back, and `pipeline` builds the bucketed (`bucketing`)
`tf.data` pipelines that feed training, validation and translation, with the word
alignments of guided alignment moved onto pieces (`alignments`).
"""
