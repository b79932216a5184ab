"""A run, or an ensemble of runs, served with attncli's own search: `TensorFlowModel`
(engine `tensorflow`).

Each search and sampling (with or without attention weights) has its own `Translator`,
traced on its first batch; prefixes, seeds, the length penalty's alpha and the sampling
temperature are its inputs, so requests that differ in those alone share one trace
(`traced_as`). The run's own search and greedy search are traced when the server starts;
others when first asked for, kept for the next requests (the eight last used, beside
those two). The forced pass of `/inspect` over a reference is traced when the model
loads too. Whatever traces TensorFlow here runs under
`attncli.model.recurrence.forward_only`: a server differentiates nothing, so its graphs
register no gradient function, and a translator dropped takes its traces with it.
"""

import collections
import dataclasses
import functools

from attncli.config.search import Decoding
from attncli.serve.limits import RequestError
from attncli.serve.served_model import (
    TRANSLATE_BATCH, ServedModel, TextTooLong,
)

#: Translators kept per model beside those traced at start-up (least recently used go).
KEPT_TRANSLATORS = 8
#: Attention views kept per model for `/step` after `/inspect` (least recently used go).
KEPT_VIEWS = 32


def forward_only(method):
    """`method` run under `attncli.model.recurrence.forward_only`: the recurrences it
    traces register no gradient function, which would hold their graph for as long as
    the process runs (a server asked for 24 settings in turn grew by 120-260 MB a
    round: docs/serving.md, "Fairness and churn")."""

    @functools.wraps(method)
    def forward(*args, **kwargs):
        from attncli.model import recurrence

        with recurrence.forward_only():
            return method(*args, **kwargs)

    return forward


def traced_as(decoding):
    """What a `Translator`'s trace depends on: `decoding` without the alpha and the
    temperature, nor the prefix and seed, which it takes at each call."""
    sampling = decoding.sampling
    if sampling is not None:
        sampling = dataclasses.replace(sampling, temperature=1.0)
    return Decoding(dataclasses.replace(decoding.search, alpha=0.0), sampling)


class TensorFlowModel(ServedModel):
    """A run (or an ensemble of runs) searched by attncli, with TensorFlow: every
    request's settings, and every attention, layer and head of a sentence (`inspect`).

    Args:
        name: the name requests use (`"model": name`).
        loaded: the `LoadedModel` (its `model` an `Ensemble` for several runs).
        members: the number of runs decoded together.
        limits: the server's `Limits`.
        max_length: the `data.max_length` the model was trained with (read by
            `attncli.serve.registry.training_max_length`), or None when unknown.
            Defaults to None.
    """

    engine = "tensorflow"

    def __init__(self, name, loaded, members, limits, max_length=None):
        # the run's decoding section, checked when read
        super().__init__(name, limits, loaded.search,
                         (loaded.source_tokenizer.level, loaded.target_tokenizer.level),
                         loaded.metadata.get("task", "translation"), members, max_length)
        self.loaded = loaded
        self._started = {}  # translators traced at start-up, never dropped
        self._translators = collections.OrderedDict()
        self._views = collections.OrderedDict()
        self._source_lengths = None

    @property
    def inspect_refusal(self):
        if self.members == 1:
            return None
        return (f"model {self.name!r} is an ensemble of {self.members} runs: its attention "
                "is the mean of its members', which has no single step to inspect; serve "
                "one run to inspect it")

    @forward_only
    def start(self):
        """Trace the run's search and greedy search (without attention weights) and, for
        one run, the forced pass of `inspect` over a reference."""
        from attncli.search.forced import force

        for search in (self.defaults, self.greedy):
            key = traced_as(Decoding(search))
            if key not in self._started:
                self._started[key] = self._translator(key, False)
                self._started[key].translate(["."])
        self.measure(self.defaults, [["."]])
        if self.members == 1:
            force(self.translator(self.defaults, False), ["."], ["."])

    @forward_only
    def translator(self, decoding, weights):
        """The `Translator` of `decoding` (a `Decoding`, or a `SearchConfig`: its search
        and sampling; the prefix, seed, alpha and temperature are given at each call),
        with attention weights if `weights`."""
        decoding = Decoding.of(decoding)
        traced = traced_as(decoding)
        if not weights and traced in self._started:
            return self._started[traced]
        key = (traced, weights)
        if key in self._translators:
            self._translators.move_to_end(key)
        else:
            translator = self._translator(traced, weights)
            translator.translate(["."])  # traced now
            self._translators[key] = translator
            if len(self._translators) > KEPT_TRANSLATORS:
                self._translators.popitem(last=False)
        return self._translators[key]

    def _translator(self, traced, weights):
        """A new `Translator` of the trace `traced` (`traced_as`: each call gives the
        prefix, seed, alpha and temperature), whose own alpha, read where no call gives
        one (a reference's score, `attncli.search.forced.force`), is the model's."""
        own = traced._replace(search=dataclasses.replace(traced.search,
                                                         alpha=self.defaults.alpha))
        return self.loaded.translator(own, attention_weights=weights, settings=True)

    def source_lengths(self, texts):
        """The number of tokens the model reads of each text (`[END]` included if it
        was trained so)."""
        import tensorflow as tf

        if self._source_lengths is None:
            # One graph, traced once: eager tokenization costs ten times as much.
            self._source_lengths = tf.function(
                lambda texts: self.loaded.source_tokenizer.tokenize(texts).row_lengths(),
                input_signature=[tf.TensorSpec([None], tf.string)], autograph=False,
            )
        lengths = self._source_lengths(tf.constant(texts, tf.string)).numpy()
        return (lengths + int(self.loaded.source_end)).tolist()

    @forward_only
    def translate(self, search, weights, texts):
        """The `Translation` of each text, in one batch (`search`: a `SearchConfig` or a
        `Decoding`, whose prefix and seed every text gets)."""
        decoding = Decoding.of(search)
        return self.translator(decoding, weights).translate(
            texts, batch_size=TRANSLATE_BATCH, prefixes=[decoding.prefix] * len(texts),
            seeds=[decoding.seed] * len(texts), alpha=decoding.search.alpha,
            temperature=None if decoding.sampling is None else decoding.sampling.temperature,
        )

    @forward_only
    def inspect(self, text, search, reference=None):
        """The `SentenceView` of `text`'s best translation, or of its given translation
        `reference` (forced decoding, `inspect_reference`), kept for `step`.

        Raises:
            RequestError: 422 for an ensemble (`inspect_refusal`); 413 for a reference of
                more than `max_output_tokens` tokens.
            TextTooLong: when `text` may translate into more than `max_output_tokens`.
        """
        from attncli.search.inspection import inspect_reference, inspect_sentence

        if self.inspect_refusal is not None:
            raise RequestError(422, self.inspect_refusal)
        key = (text, search, reference)
        if key in self._views:  # a view kept is within the limits: not measured again
            self._views.move_to_end(key)
            return self._views[key]
        [measured] = self.measure(search, [[text]])
        if isinstance(measured, TextTooLong):
            raise measured
        if reference is not None:
            self._check_reference(reference)
            view = inspect_reference(self.loaded, self.translator(search, False), text,
                                     reference)
        else:
            translator = self.translator(search, True)
            [translation] = translator.translate([text],
                                                 alpha=Decoding.of(search).search.alpha)
            view = inspect_sentence(self.loaded, translator, translation)
        self._views[key] = view
        if len(self._views) > KEPT_VIEWS:
            self._views.popitem(last=False)
        return view

    def _check_reference(self, reference):
        """Refuse a reference whose tokens and `[END]` pass `max_output_tokens` (413),
        the most a search may emit."""
        import tensorflow as tf

        tokens = int(self.loaded.target_tokenizer.tokenize(
            tf.constant([reference])).row_lengths()[0]) + 1
        if tokens > self.limits.max_output_tokens:
            raise RequestError(
                413, f"reference: its {tokens} tokens (with [END]) are more than "
                f"{self.limits.max_output_tokens} (--max-output-tokens); shorten it"
            )
