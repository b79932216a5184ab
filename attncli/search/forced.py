"""Attention over a given translation: forced decoding (teacher forcing) of a reference.

`force(translator, sources, references)` reads each source and feeds the model its given
translation, token by token, as training does: the decoder's input at step t is
`[START]` followed by the reference's tokens, and step t's output is scored against the
reference's token t (`[END]` after the last). Nothing is searched, so what is shown is
the model's attention over exactly the words given (a gold translation, a human post-edit,
another system's output), and the model's probability of each of them:

    log p(y_t | y_<t, x) = log_softmax(logits_t)[y_t]    over the tokens search may emit
    log P(Y | X)         = sum_t log p(y_t | y_<t, x)      (`Forced.log_prob`)
    score(Y, X)          = log P(Y | X) / lp(Y)             the search's own score

with `lp` the length penalty of the translator's search (`attncli.search.decoding`), so a
reference's score reads on the same scale as a translation's.

Every attention the model has is returned, per layer, `(heads, rows, columns)`: `"cross"`
(the decoder's attention over the source; a recurrent decoder's single attention as one
head), and for self-attention sides `"encoder"` and `"decoder"`. Row t of the cross
attention is the attention of the step that emitted token t, so for the tokens the search
emitted forced decoding gives the attention the search computed (tests check both).

The model runs once per batch (`Seq2Seq.teacher_forced`), compiled once per model for
any batch shape; with `log_probs=False` (what `attncli align` needs) the output layer,
the largest product of a small model, is not computed at all.
"""

import math
import weakref
from typing import NamedTuple

import numpy as np

from attncli.data.vocabulary import (
    END, END_TOKEN, PAD, RESERVED_TOKENS, START, UNK, UNK_TOKEN,
)


class Forced(NamedTuple):
    """One source and its given translation, as the model read them.

    Attributes:
        source: the source text; source_tokens: the tokens the model read.
        reference: the given translation, as given.
        tokens: its target tokens, `[END]` last.
        log_probs: float64 `(len(tokens),)`, `log p(tokens[t] | tokens[:t], source)`;
            None when forced with `log_probs=False`.
        score: `log P / lp`, the search's score of this translation; None likewise.
        attentions: dict `"cross"`, `"encoder"`, `"decoder"` (those the model has) of
            lists, one float64 array per layer: cross `(heads, len(tokens),
            len(source_tokens))`, encoder `(heads, S, S)`, decoder `(heads, T, T)`.
    """

    source: str
    source_tokens: list
    reference: str
    tokens: list
    log_probs: np.ndarray
    score: float
    attentions: dict

    @property
    def log_prob(self):
        """`log P(reference | source)`, `[END]` included (None without log probs)."""
        return None if self.log_probs is None else float(np.sum(self.log_probs))

    @property
    def weights(self):
        """The cross-attention a search reports for these tokens `(T, S)`: a recurrent
        decoder's attention, or the last block's averaged over its heads."""
        return self.attentions["cross"][-1].mean(axis=0)

    def translation(self):
        """This reference as a `Translation` with one `Hypothesis` (its text as given),
        for what shows translations: tables, heatmaps, the page, alignments."""
        from attncli.search.translation import Hypothesis, Translation

        token_log_probs = None if self.log_probs is None else self.log_probs.tolist()
        hypothesis = Hypothesis(self.reference, list(self.tokens), self.score, self.weights,
                                token_log_probs)
        return Translation(self.source, list(self.source_tokens), [hypothesis])


def force(translator, sources, references, batch_size=32, log_probs=True):
    """Forced decoding of `references` given `sources`, in batches.

    Args:
        translator: a `attncli.search.translation.Translator` (its model, tokenizers and
            search's length penalty).
        sources, references: lists of str of the same length.
        batch_size: sentences run at once. The sentences are sorted by length first, so
            a batch holds little padding; the results come back in the given order.
        log_probs: bool, compute each token's log probability and the score. Defaults
            to True; False gives the attention alone, faster.

    Returns:
        list of `Forced`, one per pair.
    """
    if len(sources) != len(references):
        raise ValueError(
            f"sources and references must pair up: {len(sources)} sources, "
            f"{len(references)} references"
        )
    order = sorted(range(len(sources)), key=lambda i: (len(sources[i]) + len(references[i]), i))
    results = [None] * len(sources)
    for start in range(0, len(order), batch_size):
        indices = order[start:start + batch_size]
        batch = _force_batch(translator, [sources[i] for i in indices],
                             [references[i] for i in indices], log_probs)
        for index, forced in zip(indices, batch):
            results[index] = forced
    return results


# The compiled pass of each model, with and without log probs: {model: {bool: function}}.
_PASSES = weakref.WeakKeyDictionary()


def _teacher_forced_pass(model, log_probs):
    """`pass(source_ids, target_in_ids, target_out_ids) -> (chosen, maps)`, compiled once
    for any batch shape: `chosen` `(batch, T)` the log p of each `target_out_ids` token
    (None without `log_probs`), `maps` those of `Seq2Seq.attention_maps`."""
    passes = _PASSES.setdefault(model, {})
    if log_probs not in passes:
        import tensorflow as tf

        from attncli.search.search_steps import next_token_log_probs

        ids = tf.TensorSpec([None, None], tf.int32)
        # The function holds its model weakly: a value that held its key would keep the
        # entry (and the model, and its graphs) alive for ever.
        held = weakref.ref(model)

        def teacher_forced(source_ids, target_in_ids, target_out_ids):
            model = held()
            features, maps = model.teacher_forced(source_ids, target_in_ids)
            maps = {name: [tf.cast(layer, tf.float32) for layer in layers]
                    for name, layers in maps.items() if layers}
            if not log_probs:
                return None, maps
            logits = tf.cast(model.decoder.output_layer(features), tf.float32)
            chosen = tf.gather(next_token_log_probs(logits), target_out_ids, batch_dims=2)
            return chosen, maps

        passes[log_probs] = tf.function(teacher_forced, input_signature=[ids, ids, ids],
                                        reduce_retracing=True)
    return passes[log_probs]


def _force_batch(translator, sources, references, log_probs):
    import tensorflow as tf

    from attncli.search.search_steps import length_penalty

    source_tokens, source_ids = translator.source_ids(tf.constant(sources))
    target_tokens = translator.target_tokenizer.tokenize(tf.constant(references))
    target_ids = tf.ragged.map_flat_values(translator.target_table.lookup, target_tokens)
    # A reserved token written in a reference is read as [UNK], as in a prefix: a [PAD]
    # must not end the sentence early, nor [END] stop it.
    flat = target_ids.flat_values
    reserved = (flat == PAD) | (flat == START) | (flat == END)
    target_ids = target_ids.with_flat_values(tf.where(reserved, tf.cast(UNK, flat.dtype), flat))
    rows = target_ids.nrows()
    end = tf.fill([rows, 1], tf.constant(END, target_ids.dtype))
    target_out = tf.concat([target_ids, end], axis=1)  # y_1 .. y_T, [END]
    start = tf.fill([rows, 1], tf.constant(START, target_ids.dtype))
    target_in = tf.concat([start, target_ids], axis=1)  # [START], y_1 .. y_T
    target_in_ids = tf.cast(target_in.to_tensor(0), tf.int32)
    target_out_ids = tf.cast(target_out.to_tensor(0), tf.int32)

    chosen, maps = _teacher_forced_pass(translator.model, log_probs)(
        tf.cast(source_ids, tf.int32), target_in_ids, target_out_ids)
    if log_probs:
        chosen = chosen.numpy().astype("float64")
        lengths = tf.cast(target_out.row_lengths(), tf.int32)
        penalties = length_penalty(lengths, float(translator.search_config.alpha)).numpy()
    maps = {name: [np.asarray(layer, "float64") for layer in layers]
            for name, layers in maps.items()}

    target_tokens = target_tokens.to_list()
    source_tokens = source_tokens.to_list()
    results = []
    for row, (source, reference) in enumerate(zip(sources, references)):
        read = [token.decode("utf-8") for token in source_tokens[row]]
        tokens = [_as_read(token.decode("utf-8")) for token in target_tokens[row]] + [END_TOKEN]
        length, width = len(tokens), len(read)
        shapes = {"cross": (length, width), "encoder": (width, width),
                  "decoder": (length, length), "alignment": (length, width)}
        attentions = {
            name: [layer[row, :, :shapes[name][0], :shapes[name][1]] for layer in layers]
            for name, layers in maps.items()
        }
        row_log_probs = chosen[row, :length] if log_probs else None
        score = (float(np.sum(row_log_probs)) / float(penalties[row]) if log_probs
                 else None)
        results.append(Forced(source, read, reference, tokens, row_log_probs, score,
                              attentions))
    return results


def _as_read(token):
    """A reference's token as the model read it: a reserved one as `[UNK]`."""
    return UNK_TOKEN if token in RESERVED_TOKENS else token


def perplexity(forced):
    """`exp(-log P / T)` of one `Forced` over its tokens, `[END]` included."""
    return math.exp(-forced.log_prob / len(forced.tokens))
