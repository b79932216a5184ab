"""Greedy and beam search over an encoder-decoder, batched and in graph mode.

A model is anything with the interface of `attncli.model.encoder_decoder.Seq2Seq`:

    memory, state = model.encode(source_ids, training=False)
    logits, state, weights = model.decode_step(token_ids, state, memory, training=False)

with `source_ids` `(batch_size, Ts)` padded with 0, `token_ids` `(batch_size,)`,
`logits` `(batch_size, V)`, `weights` `(batch_size, Ts)` (the attention weights of that
step), and every tensor of `memory` (a dict) and `state` (a tuple) batch-first. A state
may grow with each step (a self-attention decoder's cache; see
`attncli.search.growing_state`).

Each search is one `tf.while_loop` over target positions, so under `tf.function` (see
`compile_search`) the whole translation of a batch is a single graph call. Only the
hypotheses still translating are decoded (`decode_rows`): the loop carries their decoder
state and memory alone, and drops a hypothesis's rows once it has finished. A hypothesis
is scored as in Wu et al. 2016 ("Google's Neural Machine Translation System", eq. 14):

    lp(Y)       = ((5 + |Y|) / 6) ** alpha
    score(Y, X) = log P(Y | X) / lp(Y)

where `|Y|` counts the emitted tokens, end-of-sentence included. Padding and
start-of-sentence are never emitted: their logits are masked before the softmax, so
`log P` is normalised over the tokens that can be emitted.

A sentence stops at end-of-sentence, or when it reaches its own maximum length
`ceil(max_length_ratio * source_length) + max_length_offset` (source length: its
non-padding tokens), so a sentence gets the same result alone and inside a batch.

A prefix (`prefix_ids`, OpenNMT-py's target prefix, fairseq's `prefix_tokens`) forces
the first tokens of a sentence's output: while `t < P` the search emits the prefix's
token `t` and nothing else, scored with the model's `log p` of it (as teacher forcing
scores it), then searches on from there. The prefix counts in `|Y|` and in the
maximum length; a row of padding (0) forces nothing, so each sentence of a batch has a
prefix of its own length, or none.

`sample_search` replaces the search by drawing each token at random
(`attncli.search.sampling`).
"""

import math

import tensorflow as tf

from attncli.config.search import SearchConfig
from attncli.data.vocabulary import END, PAD, START
from attncli.model.recurrence import forward_only
from attncli.search.growing_state import loose_shapes
from attncli.search.sampling import sample_keys, sample_next_tokens, sentence_keys, uniforms
from attncli.search.search_steps import (  # noqa: F401 (re-exported)
    Hypotheses,
    decode_rows,
    forced_tokens,
    length_penalty,
    max_target_lengths,
    next_token_log_probs,
    top_next_tokens,
    weight_steps,
)


def greedy_search(model, source_ids, search=SearchConfig(), *, prefix_ids=None,
                  attention_weights=True, alpha=None):
    """Translate a batch by emitting the most probable token at every step.

    Args:
        model: an encoder-decoder with `encode` and `decode_step` (see the module).
        source_ids: int32 `(batch_size, Ts)`, padded with 0.
        search: a `SearchConfig` with `beam_size` 1: its `alpha` is used for `scores`
            only (greedy search does not rank hypotheses), its `max_length_ratio` and
            `max_length_offset` bound each sentence. Defaults to `SearchConfig()`.
        prefix_ids: int32 `(batch_size, P)`, tokens each sentence must begin with, padded
            with 0 (see the module), or None. Defaults to None.
        attention_weights: bool, keep each step's attention weights (`weights` of the
            result; None otherwise). Defaults to True.
        alpha: a float32 scalar tensor in place of `search.alpha` (so that one trace
            serves every alpha), or None. Defaults to None.

    Returns:
        `Hypotheses` with `n = 1`.
    """
    if search.beam_size != 1:
        raise ValueError(
            f"greedy search keeps one hypothesis. Received: beam_size={search.beam_size}"
        )
    return _token_by_token(model, source_ids, search, prefix_ids, None, 1, attention_weights,
                           alpha)


def sample_search(model, source_ids, search, sampling, seeds, *, prefix_ids=None,
                  attention_weights=True, alpha=None, temperature=None):
    """Translate a batch by drawing each token at random (`sampling`), reproducibly.

    Each sentence gets `sampling.samples` translations, each drawn on its own token by
    token from the distribution `sampling` defines (`attncli.search.sampling`), until
    end-of-sentence or its maximum length. Scores are those of a search: `log P(Y | X)`
    under the model itself (no temperature, no cut) over `lp(Y)`, and the samples of a
    sentence are returned best score first. The random numbers are a hash of the seed,
    the sentence, the sample and the step, so a sentence draws the same tokens alone or
    in any batch.

    Args:
        model: an encoder-decoder with `encode` and `decode_step` (see the module).
        source_ids: int32 `(batch_size, Ts)`, padded with 0.
        search: a `SearchConfig` with `beam_size` 1: its `alpha` and maximum lengths.
        sampling: a `Sampling`.
        seeds: int64 `(batch_size,)`, each sentence's seed (>= 0).
        prefix_ids: as for `greedy_search`. Defaults to None.
        attention_weights: as for `greedy_search`. Defaults to True.
        alpha: as for `greedy_search`. Defaults to None.
        temperature: a float64 scalar tensor in place of `sampling.temperature`, or
            None. Defaults to None.

    Returns:
        `Hypotheses` with `n = sampling.samples`, best score first.
    """
    if search.beam_size != 1:
        raise ValueError(
            f"sampling draws each translation on its own, without a beam. "
            f"Received: beam_size={search.beam_size}"
        )
    samples = sampling.samples
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    keys = sample_keys(sentence_keys(source_ids, tf.convert_to_tensor(seeds, tf.int64)), samples)

    def choose(t):
        def draw(logits, rows):
            u = uniforms(tf.gather(keys, rows), t)
            return sample_next_tokens(logits, sampling, u, temperature)

        return draw

    found = _token_by_token(model, source_ids, search, prefix_ids, choose, samples,
                            attention_weights, alpha)
    batch_size = tf.shape(source_ids)[0]

    def per_sentence(tensor):
        return tf.reshape(tensor, tf.concat([[batch_size, samples], tf.shape(tensor)[2:]], 0))

    found = Hypotheses(*(None if field is None else per_sentence(field) for field in found))
    scores, order = tf.math.top_k(found.scores, samples)  # (batch, samples), best first
    return Hypotheses(*(None if field is None else tf.gather(field, order, batch_dims=1)
                        for field in found._replace(scores=scores)))._replace(scores=scores)


def _token_by_token(model, source_ids, search, prefix_ids, choose, copies, attention_weights,
                    alpha=None):
    """The loop of greedy search and sampling: one token per row and step.

    `copies` rows decode each sentence (row `b * copies + i` is copy `i` of sentence
    `b`); `choose(t)` gives step `t`'s `choose` for `decode_rows` (None: the most
    probable token). Returns `Hypotheses` with `n = 1` per row, `(batch * copies, 1, ...)`.
    """
    alpha = search.alpha if alpha is None else alpha
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    rows = tf.shape(source_ids)[0] * copies
    max_lengths = tf.repeat(
        max_target_lengths(source_ids, search.max_length_ratio, search.max_length_offset),
        copies,
    )
    prefix_ids = _prefix_rows(prefix_ids, copies)
    memory, initial_state = model.encode(source_ids, training=False)
    every_row = tf.range(rows)
    if copies > 1:
        initial_state, memory = _rows_of(every_row // copies, (initial_state, memory))

    def step(t, token_ids, decoding, state, memory, finished, lengths, log_probs, tokens,
             token_log_probs, weights):
        best_log_probs, best, state, step_weights = decode_rows(
            model, token_ids, state, memory, decoding, 1,
            forced=_forced(prefix_ids, t), choose=None if choose is None else choose(t),
        )  # (rows, 1), (rows, 1), ..., (rows, Ts)
        alive = ~finished
        token_ids = tf.where(alive, best[:, 0], PAD)
        step_log_probs = tf.where(alive, best_log_probs[:, 0], 0.0)
        log_probs += step_log_probs
        lengths += tf.cast(alive, tf.int32)
        finished = finished | (token_ids == END) | (lengths >= max_lengths)
        # A row goes on from its own state: the rows that finished are dropped.
        still = tf.gather(~finished, decoding)
        decoding, state, memory = tf.cond(
            tf.reduce_all(still),
            lambda: (decoding, state, memory),
            lambda: _rows_of(tf.reshape(tf.where(still), [-1]), (decoding, state, memory)),
        )
        return (
            t + 1,
            token_ids,
            decoding,
            state,
            memory,
            finished,
            lengths,
            log_probs,
            tokens.write(t, token_ids),
            token_log_probs.write(t, step_log_probs),
            weights.write(t, step_weights) if attention_weights else weights,
        )

    def not_done(t, token_ids, decoding, *unused):
        return tf.size(decoding) > 0

    loop_vars = (
        tf.constant(0),
        tf.fill([rows], START),
        every_row,
        initial_state,
        memory,
        tf.zeros([rows], tf.bool),
        tf.zeros([rows], tf.int32),
        tf.zeros([rows], tf.float32),
        tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[None]),
        tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[None]),
        weight_steps([None, None], attention_weights),
    )
    *_, lengths, log_probs, tokens, token_log_probs, weights = tf.while_loop(
        not_done, step, loop_vars, shape_invariants=_shape_invariants(loop_vars, 2, 5),
        maximum_iterations=tf.reduce_max(max_lengths),
    )
    token_ids = tf.transpose(tokens.stack())  # (rows, T)
    token_log_probs = tf.transpose(token_log_probs.stack())  # (rows, T)
    if attention_weights:
        weights = tf.transpose(weights.stack(), [1, 0, 2])[:, None, :, :]  # (rows, 1, T, Ts)
    return Hypotheses(
        token_ids=token_ids[:, None, :],
        lengths=lengths[:, None],
        scores=(log_probs / length_penalty(lengths, alpha))[:, None],
        log_probs=log_probs[:, None],
        token_log_probs=token_log_probs[:, None, :],
        weights=weights if attention_weights else None,
    )


def _rows_of(indices, tensors):
    """Rows `indices` (int32 `(n,)`) of every tensor of the nested `tensors`."""
    return tf.nest.map_structure(lambda tensor: tf.gather(tensor, indices), tensors)


def _shape_invariants(loop_vars, first, last):
    """The loop's shape invariants: loop variables `first` to `last` (the rows decoded,
    their state and memory) change shape from step to step; the others keep theirs."""
    return tuple(
        loose_shapes(value) if first <= index <= last
        else tf.nest.map_structure(lambda _: None, value)
        for index, value in enumerate(loop_vars)
    )


def _prefix_rows(prefix_ids, copies):
    """int32 `(batch * copies, P)`: each sentence's prefix for each of its rows; None
    without prefixes."""
    if prefix_ids is None:
        return None
    return tf.repeat(tf.convert_to_tensor(prefix_ids, tf.int32), copies, axis=0)


def _forced(prefix_ids, t):
    """Each row's forced token at step `t` (`forced_tokens`); None without prefixes."""
    return None if prefix_ids is None else forced_tokens(prefix_ids, t)


def beam_search(model, source_ids, search, *, prefix_ids=None, attention_weights=True,
                alpha=None):
    """Translate a batch keeping the `beam_size` best hypotheses of each sentence.

    Every step extends each unfinished hypothesis by every token, and keeps the
    `beam_size` best of all candidates by `score = log P / lp`. A hypothesis that
    emitted end-of-sentence (or reached its maximum length) is finished: it stays in
    the beam as one candidate with its score unchanged and is never extended, so it is
    only displaced by better ones.

    A sentence is settled, and all its hypotheses finished, as soon as `n_best` of its
    finished hypotheses score at least `log P / lp(max_length)` of every unfinished one:
    for `alpha >= 0` that bounds the score of any continuation (`log P` only falls, `lp`
    only grows), so no later step could change its n best. The loop ends when every
    hypothesis of the batch is finished. Tokens, back-pointers and attention weights are
    stored per step and followed back from the final beams, so the weights returned
    belong to the tokens returned.

    Args:
        model: an encoder-decoder with `encode` and `decode_step` (see the module).
        source_ids: int32 `(batch_size, Ts)`, padded with 0.
        search: a `SearchConfig`: `beam_size` (1 gives exactly the tokens of
            `greedy_search`), the length penalty's `alpha` (Wu et al. 2016 found 0.6 to
            0.7 best), `n_best` (fewer settle sooner) and the maximum lengths.
        prefix_ids: int32 `(batch_size, P)`, tokens each sentence must begin with, padded
            with 0 (see the module), or None. While a sentence's prefix is forced, its
            beam holds that one hypothesis. Defaults to None.
        attention_weights: bool, keep each step's attention weights (`weights` of the
            result; None otherwise). Defaults to True.
        alpha: a float32 scalar tensor in place of `search.alpha` (>= 0, as a
            `SearchConfig` checks it), or None. Defaults to None.

    Returns:
        `Hypotheses` with `n = search.returned` (`n_best`), best first.
    """
    beam_size, n_best = search.beam_size, search.returned
    alpha = search.alpha if alpha is None else alpha
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    batch_size = tf.shape(source_ids)[0]
    max_lengths = max_target_lengths(
        source_ids, search.max_length_ratio, search.max_length_offset
    )
    prefix_ids = _prefix_rows(prefix_ids, beam_size)
    memory, initial_state = model.encode(source_ids, training=False)
    # Row b * beam_size + k is beam k of sentence b. Beams 1.. start finished with
    # log P = -inf, so the first step expands beam 0 alone, from the sentence's state;
    # a slot that no candidate can fill stays empty with score -inf.
    first_beam = tf.range(beam_size) == 0
    initial_log_probs = tf.tile(tf.where(first_beam, 0.0, -math.inf)[None], [batch_size, 1])
    initial_finished = tf.tile(~first_beam[None], [batch_size, 1])
    row_offsets = tf.range(batch_size)[:, None] * beam_size  # (batch, 1)

    # The best score any continuation of a hypothesis can reach, per sentence.
    lp_at_max_length = length_penalty(max_lengths, alpha)[:, None]  # (batch, 1)

    def settled(finished, log_probs, lengths):
        """(batch, 1): whether `n_best` finished hypotheses beat every unfinished one."""
        scores = log_probs / length_penalty(lengths, alpha)
        bounds = tf.where(finished, -math.inf, log_probs / lp_at_max_length)
        best_bound = tf.reduce_max(bounds, axis=1, keepdims=True)
        unbeatable = finished & (scores >= best_bound)
        return tf.reduce_sum(tf.cast(unbeatable, tf.int32), axis=1, keepdims=True) >= n_best

    def step(t, token_ids, decoding, state, memory, finished, lengths, log_probs, tokens,
             parents, token_log_probs, weights):
        # The beam_size best continuations of a sentence are among the beam_size best
        # tokens of each of its hypotheses (log P and lp are the same along a row).
        top_log_probs, top_ids, new_state, step_weights = decode_rows(
            model, token_ids, state, memory, decoding, beam_size,
            forced=_forced(prefix_ids, t),
        )
        k = tf.shape(top_ids)[-1]  # beam_size, or V if smaller
        top_log_probs = tf.reshape(top_log_probs, [batch_size, beam_size, k])
        top_ids = tf.reshape(top_ids, [batch_size, beam_size, k])
        # A finished beam's only candidate is itself followed by padding, log P kept.
        frozen = tf.where(tf.range(k) == 0, 0.0, -math.inf)  # (k,)
        extension = tf.where(finished[:, :, None], frozen, top_log_probs)
        extension_ids = tf.where(finished[:, :, None], PAD, top_ids)
        candidate_log_probs = log_probs[:, :, None] + extension  # (batch, beam, k)
        candidate_lengths = lengths + tf.cast(~finished, tf.int32)  # (batch, beam)
        candidate_scores = candidate_log_probs / length_penalty(candidate_lengths, alpha)[
            :, :, None
        ]
        flat_size = beam_size * k
        _, best = tf.math.top_k(tf.reshape(candidate_scores, [batch_size, flat_size]), beam_size)
        beam_parents = best // k  # (batch, beam)
        token_ids = tf.gather(
            tf.reshape(extension_ids, [batch_size, flat_size]), best, batch_dims=1
        )
        step_log_probs = tf.gather(  # the chosen token's log p; 0 for a finished beam
            tf.reshape(extension, [batch_size, flat_size]), best, batch_dims=1
        )
        log_probs = tf.gather(
            tf.reshape(candidate_log_probs, [batch_size, flat_size]), best, batch_dims=1
        )
        lengths = tf.gather(candidate_lengths, beam_parents, batch_dims=1)
        parent_finished = tf.gather(finished, beam_parents, batch_dims=1)
        finished = (
            parent_finished
            | (token_ids == END)
            | (lengths >= max_lengths[:, None])
            | tf.math.is_inf(log_probs)
        )
        finished |= settled(finished, log_probs, lengths)
        if attention_weights:
            step_weights = tf.reshape(step_weights, [batch_size, beam_size, -1])
            # Zero where the parent had finished (its row was not decoded).
            step_weights = tf.gather(step_weights, beam_parents, batch_dims=1)
            weights = weights.write(t, step_weights)
        # The unfinished hypotheses go on from their parents' new state, which an
        # unfinished parent has (the child of a finished one is finished).
        continuing = tf.reshape(tf.where(~tf.reshape(finished, [-1])), [-1])
        continuing = tf.cast(continuing, tf.int32)  # rows, in order
        parent_rows = tf.gather(tf.reshape(beam_parents + row_offsets, [-1]), continuing)
        decoded_at = tf.scatter_nd(  # each decoded row's index in `decoding`
            decoding[:, None], tf.range(tf.size(decoding)), [batch_size * beam_size]
        )
        state, memory = _rows_of(tf.gather(decoded_at, parent_rows), (new_state, memory))
        return (
            t + 1,
            tf.reshape(token_ids, [-1]),
            continuing,
            state,
            memory,
            finished,
            lengths,
            log_probs,
            tokens.write(t, token_ids),
            parents.write(t, beam_parents),
            token_log_probs.write(t, step_log_probs),
            weights,
        )

    def not_done(t, token_ids, decoding, *unused):
        return tf.size(decoding) > 0

    def step_array(dtype, element_shape):
        return tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=element_shape)

    loop_vars = (
        tf.constant(0),
        tf.fill([batch_size * beam_size], START),
        tf.reshape(row_offsets, [-1]),  # beam 0 of each sentence
        initial_state,
        memory,
        initial_finished,
        tf.zeros([batch_size, beam_size], tf.int32),
        initial_log_probs,
        step_array(tf.int32, [None, beam_size]),
        step_array(tf.int32, [None, beam_size]),
        step_array(tf.float32, [None, beam_size]),
        weight_steps([None, beam_size, None], attention_weights),
    )
    *_, lengths, log_probs, tokens, parents, token_log_probs, weights = tf.while_loop(
        not_done, step, loop_vars, shape_invariants=_shape_invariants(loop_vars, 2, 4),
        maximum_iterations=tf.reduce_max(max_lengths),
    )

    scores = log_probs / length_penalty(lengths, alpha)
    scores, order = tf.math.top_k(scores, n_best)  # (batch, n_best)
    token_ids, token_log_probs, weights = _follow_back_pointers(
        order, tokens.stack(), parents.stack(), token_log_probs.stack(),
        weights.stack() if attention_weights else None,
    )
    return Hypotheses(
        token_ids=token_ids,
        lengths=tf.gather(lengths, order, batch_dims=1),
        scores=scores,
        log_probs=tf.gather(log_probs, order, batch_dims=1),
        token_log_probs=token_log_probs,
        weights=weights,
    )


def _follow_back_pointers(final_beams, tokens, parents, token_log_probs, weights):
    """Tokens, their log probabilities and weights of the hypotheses in `final_beams`,
    read from the last step back.

    Args:
        final_beams: int32 `(batch, n)`, beam slots after the last step.
        tokens: int32 `(T, batch, beam)`, the token each slot emitted at each step.
        parents: int32 `(T, batch, beam)`, the slot each slot came from at each step.
        token_log_probs: float32 `(T, batch, beam)`, the log p of each of those tokens.
        weights: float32 `(T, batch, beam, Ts)`, or None.

    Returns:
        token_ids `(batch, n, T)`, token_log_probs `(batch, n, T)` and weights
        `(batch, n, T, Ts)` (None if `weights` is).
    """

    def back(carry, step):
        slots = carry[0]
        step_tokens, step_parents, *step_values = step
        return (
            tf.gather(step_parents, slots, batch_dims=1),
            tf.gather(step_tokens, slots, batch_dims=1),
            *(tf.gather(array, slots, batch_dims=1) for array in step_values),
        )

    batch_size, n = tf.unstack(tf.shape(final_beams))
    steps = (tokens, parents, token_log_probs)
    initial = (final_beams, tf.zeros([batch_size, n], tf.int32),
               tf.zeros([batch_size, n], tf.float32))
    if weights is not None:
        steps += (weights,)
        initial += (tf.zeros([batch_size, n, tf.shape(weights)[-1]], tf.float32),)
    _, token_ids, token_log_probs, *hypothesis_weights = tf.scan(
        back, steps, initializer=initial, reverse=True)
    # token_ids, token_log_probs: T x batch x n ; weights: T x batch x n x Ts
    if weights is not None:
        weights = tf.transpose(hypothesis_weights[0], [1, 2, 0, 3])
    return (tf.transpose(token_ids, [1, 2, 0]), tf.transpose(token_log_probs, [1, 2, 0]),
            weights)


def compile_search(model, search, *, sampling=None, prefixes=False, attention_weights=True,
                   settings=False):
    """The search as one `tf.function` from `source_ids` to `Hypotheses`, traced once.

    Args:
        model: an encoder-decoder with `encode` and `decode_step` (see the module).
        search: a `SearchConfig`; `beam_size` 1 runs `greedy_search`, larger beams
            run `beam_search`.
        sampling: a `Sampling` to run `sample_search` instead (`search.beam_size` must be
            1), or None. Defaults to None.
        prefixes: bool, the function takes each sentence's prefix ids. Defaults to False.
        attention_weights: bool, keep each step's attention weights. Defaults to True.
        settings: bool, the function takes the length penalty's `alpha` and the sampling
            temperature as inputs, so that one trace serves every value of them; the
            values of `search` and `sampling` are then not read. Defaults to False.

    The function takes int32 `source_ids` `(batch_size, Ts)` of any size without
    retracing, then (if `prefixes`) int32 `prefix_ids` `(batch_size, P)` padded with 0,
    then (with `sampling`) int64 `seeds` `(batch_size,)`, then (if `settings`) a float32
    scalar `alpha` and a float64 scalar `temperature` (read by sampling only).

    The searches loop with `tf.while_loop` and branch on Python values only, so they
    are traced without AutoGraph: converting the model's code took four fifths of the
    trace (4.9 s of CPU of a one-sentence `attncli translate`, 0.85 s without). A
    search is never differentiated, so its recurrences are traced without their
    gradient (`attncli.model.recurrence.forward_only`).
    """
    if sampling is not None and search.beam_size != 1:
        raise ValueError(
            f"sampling draws each translation on its own, without a beam. "
            f"Received: beam_size={search.beam_size}"
        )
    signature = [tf.TensorSpec([None, None], tf.int32)]
    if prefixes:
        signature.append(tf.TensorSpec([None, None], tf.int32))
    if sampling is not None:
        signature.append(tf.TensorSpec([None], tf.int64))
    if settings:
        signature += [tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.float64)]

    def run(source_ids, *inputs):
        with forward_only():
            return search_graph(source_ids, *inputs)

    def search_graph(source_ids, *inputs):
        prefix_ids = inputs[0] if prefixes else None
        options = dict(prefix_ids=prefix_ids, attention_weights=attention_weights)
        temperature = None
        if settings:
            *inputs, options["alpha"], temperature = inputs
        if sampling is not None:
            return sample_search(model, source_ids, search, sampling, inputs[-1],
                                 temperature=temperature, **options)
        if search.beam_size == 1:
            return greedy_search(model, source_ids, search, **options)
        return beam_search(model, source_ids, search, **options)

    return tf.function(run, input_signature=signature, autograph=False)
