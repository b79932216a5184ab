"""Strings in, translations out: tokenizers and a compiled search around a model."""

import numpy as np
import tensorflow as tf

from attncli.search.decoding import compile_search
from attncli.config.search import Decoding
from attncli.data.vocabulary import END, PAD, START, UNK, UNK_TOKEN
from attncli.search.hypotheses import Hypothesis, Translation
from attncli.search.prefixes import (  # noqa: F401 (PrefixError: read from here too)
    PrefixError, check_tokens, check_written,
)


class Translator:
    """Translates strings with `model`: tokenize, look up ids, search, detokenize.

    Everything from strings to strings runs in one TensorFlow graph, `translate_graph`,
    which `attncli.search.serving.export_saved_model` exports.
    `translate_graph(texts, prefixes, seeds)` takes the source sentences, strings
    `(batch,)`, each sentence's prefix, strings `(batch,)` ("" for none), and each
    sentence's seed, int64 `(batch,)` (read by sampling only), and returns a dict of
    dense tensors, which `translate` turns into NumPy arrays once per batch:

    - `translations`: strings `(batch, n)`, best first (`n` is the search's `n_best`).
    - `scores`: float32 `(batch, n)`, `log P / lp`.
    - `source_tokens`: strings `(batch, S)`, the tokens the model read, padded with "".
    - `source_lengths`: int64 `(batch,)`, the number of source tokens of each row.
    - `token_ids`: int32 `(batch, n, T)`, the emitted target ids, `[END]` last when
      emitted, then padding.
    - `lengths`: int32 `(batch, n)`, the number of emitted target ids.
    - `token_log_probs`: float32 `(batch, n, T)`, `log p` of each emitted id (see
      `attncli.search.decoding.Hypotheses`), then 0.
    - `weights` (only if `attention_weights`): float32 `(batch, n, T, Ts)`, attention
      per emitted token (see `attncli.search.decoding.Hypotheses`).

    Args:
        model: an encoder-decoder with `encode` / `decode_step` (`attncli.model.encoder_decoder.Seq2Seq`).
        source_tokenizer: the `Tokenizer` of the source language, with its vocabulary.
        target_tokenizer: the `Tokenizer` of the target language, with its vocabulary.
        decoding: the `Decoding` a command or request asks for (its search, or its
            sampling: then `n` is `sampling.samples`; its prefix and seed are those of
            every text `translate` is not given others for), or a `SearchConfig` (that
            search, nothing more). Defaults to `Decoding()` (greedy).
        source_end: bool, append the end id to each source, as the model was trained
            (`make_dataset(source_end=...)`). Defaults to False.
        attention_weights: bool, collect the attention weights of every emitted token
            (`Hypothesis.weights`; None otherwise, and the search does not keep them).
            Defaults to True.
        settings: bool, `translate_graph` also takes the length penalty's `alpha`
            (float32) and the sampling `temperature` (float64), scalars, after the seeds,
            so that one trace serves every value (`translate(alpha=..., temperature=...)`;
            a server's requests each ask for their own). Defaults to False: they are
            those of the decoding's search and sampling, constants of the graph.

    A prefix is tokenized by the target tokenizer as a text of its own and forced
    (`attncli.search.decoding`): the translation begins with its tokens, and its text
    with the prefix as the model writes it (the target side's normalisation applied).
    `translate` refuses a prefix that cannot be forced (`check_prefixes`); inside the
    graph a reserved token of a prefix is read as `[UNK]`, and a prefix as long as a
    sentence's maximum length is cut there.

    Example:

    >>> translator = Translator(model, source_tokenizer, target_tokenizer,
    ...                         Decoding(SearchConfig(beam_size=4)))
    >>> [result] = translator.translate(["Hace frío."])
    >>> result.hypotheses[0].text
    "it's cold."
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, decoding=None,
                 source_end=False, attention_weights=True, settings=False):
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.decoding = Decoding.of(decoding)
        self.search_config, self.sampling = self.decoding.search, self.decoding.sampling
        self.source_end = source_end
        self.attention_weights = attention_weights
        self.settings = settings
        # Created here, outside any graph, so a SavedModel can track them.
        self.source_table = _lookup_table(source_tokenizer.vocabulary.tokens)
        self.target_table = _lookup_table(target_tokenizer.vocabulary.tokens)
        self.target_tokens = tf.constant(target_tokenizer.vocabulary.tokens)
        # Ids to token strings outside the graph, a batch at a time.
        self.target_vocabulary = np.array(target_tokenizer.vocabulary.tokens, dtype=object)
        self.search = compile_search(model, self.search_config, sampling=self.sampling,
                                     prefixes=True, attention_weights=attention_weights,
                                     settings=settings)
        signature = [tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.string),
                     tf.TensorSpec([None], tf.int64)]
        if settings:
            signature += [tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.float64)]
        # Traced once (any batch of strings), without AutoGraph, as the search is.
        self.translate_graph = tf.function(
            self._translate_graph, input_signature=signature, autograph=False,
        )

    @property
    def returned(self):
        """Translations per sentence: the samples drawn, or the search's `n_best`."""
        return self.decoding.returned

    def source_ids(self, texts):
        """Source tokens (ragged strings `(batch, None)`) and padded int32 ids `(batch, Ts)`."""
        tokens = self.source_tokenizer.tokenize(texts)
        if self.source_end:
            end = tf.fill([tokens.nrows(), 1], self.source_tokenizer.vocabulary.tokens[END])
            tokens = tf.concat([tokens, end], axis=1)
        ids = tf.ragged.map_flat_values(self.source_table.lookup, tokens).to_tensor(PAD)
        # At least one (padding) column: the encoder cannot run over zero steps, and a
        # batch of empty sentences has none.
        missing = tf.maximum(1 - tf.shape(ids)[1], 0)
        return tokens, tf.pad(ids, [[0, 0], [0, missing]])

    def prefix_ids(self, prefixes):
        """int32 `(batch, P)`: each prefix's target ids padded with 0 (`[UNK]` for an unknown
        token or a reserved one); a blank prefix is a row of padding (nothing forced)."""
        ids = tf.ragged.map_flat_values(
            self.target_table.lookup, self.target_tokenizer.tokenize(prefixes)
        )
        # Reserved tokens become [UNK] before padding, so a `[PAD]` written in a prefix is
        # not read as the end of what is forced.
        reserved = (ids.flat_values == PAD) | (ids.flat_values == START) | (
            ids.flat_values == END)
        return ids.with_flat_values(
            tf.where(reserved, tf.cast(UNK, ids.dtype), ids.flat_values)
        ).to_tensor(PAD)

    def _settings(self, alpha=None, temperature=None):
        """The graph's `alpha` and `temperature` inputs: those given, else the search's
        and the sampling's own; none without `settings`."""
        if not self.settings:
            if alpha is not None or temperature is not None:
                raise ValueError("alpha and temperature are inputs of a Translator made "
                                 "with settings=True only")
            return ()
        if alpha is None:
            alpha = self.search_config.alpha
        if temperature is None:
            temperature = self.sampling.temperature if self.sampling is not None else 1.0
        return tf.constant(alpha, tf.float32), tf.constant(temperature, tf.float64)

    def _translate_graph(self, texts, prefixes, seeds, *settings):
        source_tokens, source_ids = self.source_ids(texts)
        inputs = (source_ids, self.prefix_ids(prefixes))
        if self.sampling:
            inputs += (seeds,)
        hypotheses = self.search(*inputs, *settings)
        batch_size, n, steps = tf.unstack(tf.shape(hypotheses.token_ids))
        flat_ids = tf.reshape(hypotheses.token_ids, [batch_size * n, steps])
        lengths = tf.reshape(hypotheses.lengths, [-1])
        # The text leaves out the end token; `token_ids` keep it.
        ended = tf.gather(flat_ids, tf.maximum(lengths - 1, 0), batch_dims=1) == END
        text_tokens = tf.RaggedTensor.from_tensor(
            flat_ids, lengths=lengths - tf.cast(ended & (lengths > 0), tf.int32)
        )
        texts_out = self.target_tokenizer.detokenize(tf.gather(self.target_tokens, text_tokens))
        outputs = {
            "translations": tf.reshape(texts_out, [batch_size, n]),
            "scores": hypotheses.scores,
            "source_tokens": source_tokens.to_tensor(""),
            "source_lengths": source_tokens.row_lengths(),
            "token_ids": hypotheses.token_ids,
            "lengths": hypotheses.lengths,
            "token_log_probs": hypotheses.token_log_probs,
        }
        if self.attention_weights:
            outputs["weights"] = hypotheses.weights
        return outputs

    def serve(self, texts, prefixes=None, seeds=None):
        """The dense outputs of `translate_graph`: translations and scores `(batch, n)`;
        no prefixes and seed 0 where None. Signatures that call it share one trace."""
        if prefixes is None:
            prefixes = tf.fill(tf.shape(texts), "")
        if seeds is None:
            seeds = tf.zeros(tf.shape(texts), tf.int64)
        outputs = self.translate_graph(texts, prefixes, seeds, *self._settings())
        return {"translations": outputs["translations"], "scores": outputs["scores"]}

    def check_prefixes(self, texts, prefixes):
        """Raises `PrefixError` (one line) for the first prefix that cannot be forced: one
        that is not blank but has no token, only unknown tokens, a reserved token written
        in it (`[START]`, `[END]`, `[PAD]`, in any case: whether a tokenizer keeps it whole
        or cuts it into `[`, `end`, `]`), or as many tokens as its sentence's
        translation may have (`max_length_ratio` x source tokens + `max_length_offset`).
        A blank prefix forces nothing."""
        rows = [index for index, prefix in enumerate(prefixes) if prefix.strip()]
        if not rows:
            return
        for index in rows:
            check_written(prefixes[index], index)
        tokens = self.target_tokenizer.tokenize(tf.constant([prefixes[i] for i in rows]))
        source_lengths = self.source_tokenizer.tokenize(
            tf.constant([texts[i] for i in rows])).row_lengths().numpy() + int(self.source_end)
        known = set(self.target_tokenizer.vocabulary.tokens) - {UNK_TOKEN}
        for index, row, source_length in zip(rows, tokens.to_list(), source_lengths):
            check_tokens(prefixes[index], [token.decode("utf-8") for token in row], known,
                         texts[index], int(source_length), self.search_config, index)

    def translate(self, texts, batch_size=64, prefixes=None, seeds=None, alpha=None,
                  temperature=None):
        """Translations of a list of strings, in order.

        Sentences are translated `batch_size` at a time, grouped by length so that
        little padding is computed (a sentence's result does not depend on its batch).

        Args:
            texts: source sentences.
            batch_size: sentences per graph call. Defaults to 64.
            prefixes: each text's prefix ("" for none), or None (the decoding's prefix
                for every text). Checked first (`check_prefixes`). Defaults to None.
            seeds: each text's seed (an int in [0, 2**63 - 1]) for sampling, or None
                (the decoding's seed for every text). Defaults to None.
            alpha, temperature: the length penalty's alpha and the sampling temperature
                of this call, in place of the search's and the sampling's own (checked
                by the caller: a `SearchConfig` and a `Sampling` check them); a
                Translator made with `settings=True` only. Defaults to None.

        Returns:
            A list of `Translation`, one per text.

        Raises:
            PrefixError: a prefix cannot be forced.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1. Received: batch_size={batch_size}")
        prefixes = [self.decoding.prefix] * len(texts) if prefixes is None else list(prefixes)
        seeds = [self.decoding.seed] * len(texts) if seeds is None else list(seeds)
        if not len(prefixes) == len(seeds) == len(texts):
            raise ValueError(f"{len(texts)} texts need as many prefixes and seeds. "
                             f"Received: {len(prefixes)} prefixes, {len(seeds)} seeds")
        settings = self._settings(alpha, temperature)
        self.check_prefixes(texts, prefixes)
        order = sorted(range(len(texts)), key=lambda index: len(texts[index].split()))
        results = [None] * len(texts)
        for start in range(0, len(texts), batch_size):
            indices = order[start : start + batch_size]
            batch = [texts[index] for index in indices]
            outputs = self.translate_graph(
                tf.constant(batch, tf.string),
                tf.constant([prefixes[index] for index in indices], tf.string),
                tf.constant([seeds[index] for index in indices], tf.int64),
                *settings,
            )
            arrays = {name: tensor.numpy() for name, tensor in outputs.items()}
            for row, index in enumerate(indices):
                results[index] = self._translation(batch[row], arrays, row)
        return results

    def detokenize(self, tokens):
        """The text of a list of target tokens, as a translation's text is made."""
        ragged = tf.ragged.constant([tokens], dtype=tf.string)
        return self.target_tokenizer.detokenize(ragged)[0].numpy().decode("utf-8")

    def _translation(self, source, arrays, row):
        """The `Translation` of row `row` of a batch's outputs, as NumPy `arrays`."""
        source_tokens = [
            token.decode("utf-8")
            for token in arrays["source_tokens"][row, : arrays["source_lengths"][row]]
        ]
        weights = arrays.get("weights")
        hypotheses = []
        for i, text in enumerate(arrays["translations"][row]):
            length = arrays["lengths"][row, i]
            hypotheses.append(
                Hypothesis(
                    text=text.decode("utf-8"),
                    tokens=self.target_vocabulary[arrays["token_ids"][row, i, :length]].tolist(),
                    score=float(arrays["scores"][row, i]),
                    weights=None if weights is None
                    else weights[row, i, :length, : len(source_tokens)],
                    token_log_probs=arrays["token_log_probs"][row, i, :length].tolist(),
                )
            )
        return Translation(source, source_tokens, hypotheses)


def _lookup_table(tokens):
    """A table from token strings to int32 ids (their positions), `UNK` for any other."""
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(tokens), tf.range(len(tokens), dtype=tf.int32)
        ),
        default_value=UNK,
    )
