"""Data: from parallel text on disk to padded batches of token ids.

`sources` finds the files a run's `data:` section names and reads its corpus, split into
train, validation and test by `corpora` (the bundled Tatoeba pairs, tab-separated pairs,
line-aligned files, pronunciation dictionaries; `readers` reads the lines). `tokenization`
holds the `Tokenizer`, which normalises text and hands it to the class of its level
(`levels`: characters, words, WordPiece subwords learned by `wordpiece`, pieces given;
`sentencepiece_level`, with `sentencepiece_models` checking model files); `text_rules`
holds the reserved tokens and detokenization rules it shares with an export's plain
tokenizer, and `quiet_stderr` silences the C++ libraries under it. `vocabulary` maps
tokens to ids and back, and `pipeline` builds the bucketed (`bucketing`) `tf.data`
pipelines that feed training, validation and translation, with the word alignments of
guided alignment moved onto pieces (`alignments`).
"""
