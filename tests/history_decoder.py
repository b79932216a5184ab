"""A decoder whose every sequence probability is known, for the search tests.

`HistoryDecoder` is a deterministic test double with the `encode` / `decode_step`
interface of `attncli.model.encoder_decoder.Seq2Seq`: its next-token logits depend on the
sentence, the previous token and a code of the whole history (carried in its state, so a
beam search that reorders state wrongly gets different probabilities). `numpy_log_prob`
recomputes any sequence's probability in NumPy, so the best hypotheses can be enumerated
by brute force (`brute_force`).
"""

import itertools

import numpy as np
import tensorflow as tf

from attncli.data.vocabulary import END, PAD, START

VOCAB_SIZE = 6  # pad 0, unk 1, bos 2, eos 3, and the words 4 and 5
EMITTED = (1, 3, 4, 5)  # every token but padding and start-of-sentence
WORDS = (1, 4, 5)
HISTORY_CODES = 7
NUM_TABLES = 5


class HistoryDecoder:
    """Next-token logits `table[prev] + history_table[code]`, code = f(all tokens so far).

    The table pair is chosen by the sentence's first source id; the history code is
    `code' = (3 * code + token) mod 7`. The attention weights are one-hot at source
    position `code' mod source_length`, so they too depend on the whole history.
    """

    def __init__(self, seed=0, scale=1.0):
        rng = np.random.default_rng(seed)
        self.transitions = rng.normal(scale=scale, size=(NUM_TABLES, VOCAB_SIZE, VOCAB_SIZE))
        self.history = rng.normal(scale=scale, size=(NUM_TABLES, HISTORY_CODES, VOCAB_SIZE))
        self.transitions_tf = tf.constant(self.transitions, tf.float32)
        self.history_tf = tf.constant(self.history, tf.float32)

    def encode(self, source_ids, training=False):
        source_ids = tf.convert_to_tensor(source_ids, tf.int32)
        memory = {
            "table": source_ids[:, 0] % NUM_TABLES,
            "source_lengths": tf.reduce_sum(tf.cast(source_ids != PAD, tf.int32), axis=1),
            "source_width": tf.zeros_like(source_ids),
        }
        return memory, (tf.zeros_like(source_ids[:, 0]),)

    def decode_step(self, token_ids, state, memory, training=False):
        (code,) = state
        code = (3 * code + token_ids) % HISTORY_CODES
        table = memory["table"]
        logits = tf.gather_nd(self.transitions_tf, tf.stack([table, token_ids], axis=1))
        logits += tf.gather_nd(self.history_tf, tf.stack([table, code], axis=1))
        position = code % memory["source_lengths"]
        weights = tf.one_hot(position, tf.shape(memory["source_width"])[1])
        return logits, (code,), weights

    # NumPy reference of the same model.
    def numpy_steps(self, source, tokens):
        """log P of each token of `tokens` and the weights when each was emitted."""
        table = source[0] % NUM_TABLES
        source_length = int(np.sum(np.asarray(source) != PAD))
        code, previous = 0, START
        log_probs, weights = [], []
        for token in tokens:
            code = (3 * code + previous) % HISTORY_CODES
            logits = self.transitions[table, previous] + self.history[table, code]
            logits = np.where(np.isin(np.arange(VOCAB_SIZE), EMITTED), logits, -np.inf)
            shifted = logits - logits.max()
            log_softmax = shifted - np.log(np.exp(shifted).sum())
            log_probs.append(log_softmax[token])
            weights.append(np.eye(len(source))[code % source_length])
            previous = token
        return np.array(log_probs), np.array(weights)

    def numpy_log_prob(self, source, tokens):
        return float(np.sum(self.numpy_steps(source, tokens)[0]))


def numpy_length_penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def all_hypotheses(max_length):
    """Every output a search can produce: words then eos, or max_length words."""
    for length in range(1, max_length + 1):
        for words in itertools.product(WORDS, repeat=length - 1):
            yield words + (END,)
    yield from itertools.product(WORDS, repeat=max_length)


def brute_force(double, source, max_length, alpha):
    """All hypotheses with their scores, best first."""
    scored = [
        (double.numpy_log_prob(source, tokens) / numpy_length_penalty(len(tokens), alpha), tokens)
        for tokens in all_hypotheses(max_length)
    ]
    return sorted(scored, key=lambda pair: -pair[0])


SOURCES = [[5, 7, 7, 7], [6, 9, 0, 0], [7, 0, 0, 0], [8, 8, 8, 0], [9, 6, 6, 6]]
