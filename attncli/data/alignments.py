"""Word alignments of the training pairs for guided alignment training, moved onto pieces.

`data.alignments` is a Pharaoh file (fast_align's, eflomal's): line n holds the links
`i-j` of line n of the training file, source word `i` and target word `j` counted from
0, words being the line's whitespace-separated words as written. The reader keeps each
pair's line number (`Corpus.lines`), so a pair finds its links whatever was skipped
(bad or blank lines), carved out (validation, test) or later dropped (`max_length`).

Pieces follow their words. The model reads pieces, and a word may be several (WordPiece
`Mach ##en`, a punctuation mark split off `hungry.`, SentencePiece `▁Kat ze`):

- `piece_words` gives each token of a sentence the word it belongs to, by tokenizing
  the sentence's words one by one with the run's tokenizer: their tokens, in order
  (at the `char` level with the space token `▁` between two words, in no word), must
  be the sentence's tokens, which they are at every tokenizer level (no piece spans two
  words) unless normalisation joins or splits words (the `char` level keeps a no-break
  space, which Python splits words on); such a sentence gets no links, and is counted.
- `piece_links` turns each word link `i-j` into the piece links `(t, s)` of every
  target piece `t` of word `j` and every source piece `s` of word `i`: a target piece
  inherits the links of its word, a link to a source word covers all its pieces.
- `gold_distributions` makes the gold distribution of each target position of a batch:
  `g_t(s) = 1 / |P_t|` for the source pieces `P_t` linked to `t`, 0 elsewhere (a row
  of zeros for a position with no link, `[END]` and padding among them).
"""

import numpy as np
import tensorflow as tf

from attncli.links import LinkError, check_within, parse_pharaoh
from attncli.data.readers import CorpusReport, _numbered_lines
from attncli.data.text_rules import SPACE_TOKEN


def read_alignments(path, lines, limit=None):
    """The links of each line of the Pharaoh file `path`.

    Args:
        path: the file (gzip when its name ends `.gz`).
        lines: the lines of the training file (its `CorpusReport.lines`) the file must
            have as many of.
        limit: read at most this many lines (`data.limit`, which the training file was
            read with). Defaults to None (all).

    Returns:
        list of frozensets of `(i, j)`, one per line.

    Raises:
        LinkError: a line that is not Pharaoh links, or a line count that is not the
            training file's (one line, naming the file and line).
    """
    alignments = []
    for number, text in _numbered_lines(path, CorpusReport(str(path))):
        if limit is not None and number > limit:
            break
        if text is None:
            raise LinkError(f"{path}, line {number}: bytes that are not UTF-8")
        alignments.append(parse_pharaoh(text, f"{path}, line {number}"))
    if len(alignments) != lines:
        raise LinkError(
            f"{path} has {len(alignments)} lines and the training file {lines}: line n of "
            "data.alignments holds the links of line n of the training file"
        )
    return alignments


def read_pair_links(path, corpus, limit=None):
    """The word links of each pair of the training `corpus` (read from its file, whose
    `report.lines` the Pharaoh file `path` must have), from `path`: `pair_links` of
    `read_alignments`."""
    return pair_links(corpus, read_alignments(path, corpus.report.lines, limit), path)


def read_split_links(path, splits, limit=None):
    """The word links of the training pairs of `splits`, and of its validation pairs
    when they were carved from the training file (they share its report), from `path`.

    Returns:
        `(train_links, valid_links)`: `pair_links` of each; `valid_links` is None for a
        validation split read from a file of its own, which `path` does not cover.
    """
    alignments = read_alignments(path, splits.train.report.lines, limit)
    valid = None
    if splits.valid.report is splits.train.report:
        valid = pair_links(splits.valid, alignments, path)
    return pair_links(splits.train, alignments, path), valid


def pair_links(corpus, alignments, path):
    """The word links of each pair of `corpus` (read from a file: `corpus.lines`),
    checked to fall within its words.

    Raises:
        LinkError: a link to a word past its sentence, naming the file and line.
    """
    links = []
    for source, target, line in zip(corpus.sources, corpus.targets, corpus.lines):
        found = alignments[line - 1]
        check_within(found, len(source.split()), len(target.split()), f"{path}, line {line}")
        links.append(found)
    return links


def piece_words(texts, tokenizer, chunk_size=2048):
    """The word each token of each text belongs to.

    Args:
        texts: list of str.
        tokenizer: the `Tokenizer` the texts are encoded with (with its vocabulary).
        chunk_size: texts tokenized per call. Defaults to 2048.

    Returns:
        list, per text, of the index of the whitespace-separated word of each token
        (-1 for the space token between words at the `char` level), or None when the
        tokens of the text's words, tokenized one by one, are not the text's tokens.
    """
    space = SPACE_TOKEN.encode()
    owners = []
    for start in range(0, len(texts), chunk_size):
        chunk = list(texts[start : start + chunk_size])
        words = [text.split() for text in chunk]
        flat = [word for text_words in words for word in text_words]
        line_tokens = tokenizer.tokenize(tf.constant(chunk, tf.string)).to_list()
        word_tokens = tokenizer.tokenize(tf.constant(flat, tf.string)).to_list() if flat else []
        taken = 0
        for tokens, text_words in zip(line_tokens, words):
            made, owner = [], []
            for index, pieces in enumerate(word_tokens[taken : taken + len(text_words)]):
                if pieces and made and tokenizer.level == "char":
                    made.append(space)
                    owner.append(-1)
                made.extend(pieces)
                owner.extend([index] * len(pieces))
            taken += len(text_words)
            owners.append(owner if made == tokens else None)
    return owners


def piece_links(corpus, word_links, source_tokenizer, target_tokenizer):
    """The links of each pair of `corpus` between its pieces: `(t, s)` for every target
    piece `t` of a target word `j` and every source piece `s` of a source word `i`
    linked to it (`i-j` in `word_links`).

    `t` counts the target's pieces from 0, so it is the position of the token in
    `target_out` (and of the decoder step that emits it); `s` the position in the
    source's ids. Each link appears once.

    Args:
        corpus: the training `Corpus`.
        word_links: one set of `(i, j)` per pair (`pair_links`).
        source_tokenizer, target_tokenizer: the run's `Tokenizer`s.

    Returns:
        `(links, unmatched)`: int32 ragged `(pairs, None, 2)`, and the number of pairs
        with word links that got none because their pieces could not be matched to
        their words (see `piece_words`).
    """
    source_owners = piece_words(corpus.sources, source_tokenizer)
    target_owners = piece_words(corpus.targets, target_tokenizer)
    values, lengths, unmatched = [], [], 0
    for links, source_owner, target_owner in zip(word_links, source_owners, target_owners):
        if links and (source_owner is None or target_owner is None):
            unmatched += 1
            links = ()
        pieces_of, sources_of = {}, {}
        for s, i in enumerate(source_owner or ()):
            pieces_of.setdefault(i, []).append(s)
        for i, j in links:
            sources_of.setdefault(j, []).append(i)
        before = len(values)
        for t, j in enumerate(target_owner if links else ()):
            for i in sorted(sources_of.get(j, ())):
                values.extend((t, s) for s in pieces_of.get(i, ()))
        lengths.append(len(values) - before)
    flat = np.array(values, dtype=np.int32).reshape(-1, 2)
    return tf.RaggedTensor.from_row_lengths(flat, np.array(lengths, dtype=np.int64)), unmatched


def gold_distributions(links, target_length, source_length):
    """The gold attention of each target position of a batch, from its piece links.

        g_t(s) = 1 / |P_t| if s is in P_t (the source pieces linked to t), else 0

    Args:
        links: int32 ragged `(batch_size, None, 2)` of `(t, s)`, each once.
        target_length, source_length: int32 scalars, the padded lengths `T`, `S`.

    Returns:
        float32 `(batch_size, T, S)`; a row of zeros at a position with no link.
    """
    rows = tf.cast(links.value_rowids(), tf.int32)
    indices = tf.concat([rows[:, None], links.values], axis=1)
    shape = tf.stack([tf.cast(links.nrows(), tf.int32), target_length, source_length])
    linked = tf.scatter_nd(indices, tf.ones_like(rows, tf.float32), shape)
    return linked / tf.maximum(tf.reduce_sum(linked, axis=-1, keepdims=True), 1.0)
