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

Greedy search, beam search and sampling are strategies of one loop (`search_loop`;
`attncli.search.strategy`): `sample_search` draws each token at random
(`attncli.search.sampling`).
"""

import tensorflow as tf

from attncli.config.search import SearchConfig
from attncli.data.vocabulary import START
from attncli.model.recurrence import forward_only
from attncli.search.growing_state import loose_shapes
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
from attncli.search.beam import Beam
from attncli.search.greedy import Greedy, Sampled


def greedy_search(model, source_ids, search=SearchConfig(), *, prefix_ids=None,
                  attention_weights=True, alpha=None):
    """Translate a batch by emitting the most probable token at every step (`Greedy`).

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
    return search_loop(model, source_ids, Greedy(), search, prefix_ids=prefix_ids,
                       attention_weights=attention_weights, alpha=alpha)


def sample_search(model, source_ids, search, sampling, seeds, *, prefix_ids=None,
                  attention_weights=True, alpha=None, temperature=None):
    """Translate a batch by drawing each token at random (`Sampled`), reproducibly:
    `sampling.samples` translations per sentence, each drawn on its own token by token
    until end-of-sentence or its maximum length, best score first.

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
    check_sampling(search, sampling)
    return search_loop(model, source_ids, Sampled(sampling, seeds, temperature), search,
                       prefix_ids=prefix_ids, attention_weights=attention_weights, alpha=alpha)


def beam_search(model, source_ids, search, *, prefix_ids=None, attention_weights=True,
                alpha=None):
    """Translate a batch keeping the `beam_size` best hypotheses of each sentence (`Beam`).

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
    return search_loop(model, source_ids, Beam(search), search,
                       prefix_ids=prefix_ids, attention_weights=attention_weights, alpha=alpha)


def search_loop(model, source_ids, strategy, search, *, prefix_ids=None,
                attention_weights=True, alpha=None):
    """The one loop of every search; `strategy` (`attncli.search.strategy`) chooses.

    Each step decodes the rows still translating (`decode_rows`, a prefix's token
    forced where one is due), lets the strategy select each hypothesis's token and the
    rows that go on, and records the step's tokens, their `log p`, the attention
    weights and the strategy's parents. The loop ends when no row is left to decode.

    Args:
        model: an encoder-decoder with `encode` and `decode_step` (see the module).
        source_ids: int32 `(batch_size, Ts)`, padded with 0.
        strategy: a `Strategy` (`strategy_for`).
        search: a `SearchConfig`: its `alpha` and maximum lengths.
        prefix_ids, attention_weights, alpha: as for `greedy_search`.

    Returns:
        `strategy.result(...)`: `Hypotheses`.
    """
    alpha = search.alpha if alpha is None else alpha
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    max_lengths = max_target_lengths(
        source_ids, search.max_length_ratio, search.max_length_offset
    )
    prefix_ids = _prefix_rows(prefix_ids, strategy.copies)
    memory, initial_state = model.encode(source_ids, training=False)
    decoding, initial_state, memory, hypotheses = strategy.start(
        source_ids, initial_state, memory, max_lengths, alpha)

    def step(t, token_ids, decoding, state, memory, hypotheses, tokens, parents,
             token_log_probs, weights):
        top_log_probs, top_ids, state, step_weights = decode_rows(
            model, token_ids, state, memory, decoding, strategy.candidates,
            forced=_forced(prefix_ids, t), choose=strategy.choose(t),
        )  # (rows, k), (rows, k), the state of `decoding`, (rows, Ts)
        chosen = strategy.select(t, top_log_probs, top_ids, hypotheses)
        if attention_weights:
            weights = weights.write(t, strategy.follow(step_weights, chosen))
        decoding, state, memory = strategy.next_rows(chosen, decoding, state, memory)
        return (
            t + 1,
            chosen.token_ids,
            decoding,
            state,
            memory,
            chosen.hypotheses,
            tokens.write(t, chosen.token_ids),
            strategy.record_parents(parents, t, chosen),
            token_log_probs.write(t, chosen.step_log_probs),
            weights,
        )

    def not_done(t, token_ids, decoding, *unused):
        return tf.size(decoding) > 0

    def step_array(dtype):
        return tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=[None])

    loop_vars = (
        tf.constant(0),
        tf.fill(tf.shape(hypotheses.finished), START),
        decoding,
        initial_state,
        memory,
        hypotheses,
        step_array(tf.int32),
        strategy.parent_record(),
        step_array(tf.float32),
        weight_steps([None, None], attention_weights),
    )
    *_, hypotheses, tokens, parents, token_log_probs, weights = tf.while_loop(
        not_done, step, loop_vars, shape_invariants=_shape_invariants(loop_vars, 2, 4),
        maximum_iterations=tf.reduce_max(max_lengths),
    )
    return strategy.result(hypotheses, tokens.stack(), parents, token_log_probs.stack(),
                           weights.stack() if attention_weights else None)


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


def check_sampling(search, sampling):
    """Refuse a `sampling` with a beam: sampling draws each translation on its own.

    Raises:
        ValueError: naming the beam size.
    """
    if sampling is not None and search.beam_size != 1:
        raise ValueError(
            f"sampling draws each translation on its own, without a beam. "
            f"Received: beam_size={search.beam_size}"
        )


def strategy_for(search, sampling=None, seeds=None, temperature=None):
    """The strategy a request names: `Sampled` with a `sampling` (and each sentence's
    `seeds`, a `temperature` tensor or None), else `Greedy` for `search.beam_size` 1 and
    `Beam` for larger beams.

    Raises:
        ValueError: a `sampling` with a beam, or without `seeds`.
    """
    check_sampling(search, sampling)
    if sampling is not None:
        if seeds is None:
            raise ValueError("sampling needs each sentence's seed. Received: seeds=None")
        return Sampled(sampling, seeds, temperature)
    if search.beam_size == 1:
        return Greedy()
    return Beam(search)


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
    check_sampling(search, sampling)
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
        alpha = temperature = None
        if settings:
            *inputs, alpha, temperature = inputs
        seeds = inputs[-1] if sampling is not None else None
        strategy = strategy_for(search, sampling, seeds, temperature)
        return search_loop(model, source_ids, strategy, search, prefix_ids=prefix_ids,
                           attention_weights=attention_weights, alpha=alpha)

    return tf.function(run, input_signature=signature, autograph=False)
