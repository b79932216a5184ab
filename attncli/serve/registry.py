"""The models one server loaded, each with its translators per search.

A `ServedModel` is one name, whatever engine runs it (`ENGINES`): what every engine does
the same way (a request's search and decoding settings, the cost of its texts, what
`/models` says) is written there once, and each engine's kind of model adds how it
translates. A search is the model's decoding settings with a request's `beam`, `alpha`
and `n_best` applied, as `attncli translate` applies its options; a translation
request's `Decoding` adds its prefix and its sampling and seed.

`TensorFlowModel` (engine `tensorflow`) is a run, or an ensemble of runs
(`load_ensemble`, as `attncli translate --ensemble` loads them), searched by attncli.
`attncli.serve.exported_model.ExportedModel` (engine `ctranslate2`) is a CTranslate2
export, run without TensorFlow.

In a `TensorFlowModel`, each search and sampling (with or without attention weights)
has its own `Translator`, traced on its first batch; prefixes, seeds, the length
penalty's alpha and the sampling temperature are its inputs, so requests that differ in
those alone share one trace (`traced_as`). The run's own search and greedy search are
traced when the server starts; others when first asked for, kept for the next requests
(the eight last used, beside those two). The forced pass of `/inspect` over a reference
is traced when the model loads too. Whatever traces TensorFlow here runs under
`attncli.model.recurrence.forward_only`: a server differentiates nothing, so its graphs
register no gradient function, and a translator dropped takes its traces with it.

Every method that translates (with TensorFlow or CTranslate2) is called on the batcher's
worker thread.
"""

import collections
import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from attncli.config.search import Sampling, SamplingOptions, SearchConfig, requested_sampling
from attncli.errors import shown
from attncli.search.prefixes import PrefixError
from attncli.serve.limits import RequestError

#: Translators kept per model beside those traced at start-up (least recently used go).
KEPT_TRANSLATORS = 8
#: Sentences per search call: a batch is sorted by length and cut into calls of this
#: many, as `attncli translate` does (similar lengths pad less).
TRANSLATE_BATCH = 64
#: Attention views kept per model for `/step` after `/inspect` (least recently used go).
KEPT_VIEWS = 32
#: The options of sampling as a request's JSON fields spell them.
SAMPLING_OPTIONS = SamplingOptions(
    sampling="sampling", temperature="temperature", seed="seed", beam="beam", n_best="n_best",
    asking='"sampling": "random" (or "topk:K", "topp:P")', per="text",
)


class TextTooLong(Exception):
    """Text `position` of a request is longer than the model may read or write: `why`,
    the rest of the one-line refusal (413) after the text's name."""

    def __init__(self, position, why):
        super().__init__(position, why)
        self.position, self.why = position, why


class Decoding(NamedTuple):
    """How a translation request is decoded (hashable: the batcher merges requests by it).

    Attributes:
        search: the `SearchConfig`.
        sampling: a `Sampling` drawing the translations instead, or None.
        prefix: what every translation of the request begins with ("" for nothing).
        seed: the sampling's seed.
    """

    search: SearchConfig
    sampling: Sampling | None = None
    prefix: str = ""
    seed: int = 0

    def to_dict(self):
        """The search's settings, and the prefix and sampling when asked for."""
        settings = self.search.to_dict()
        if self.prefix:
            settings["prefix"] = self.prefix
        if self.sampling is not None:
            settings.update(sampling=str(self.sampling), temperature=self.sampling.temperature,
                            samples=self.sampling.samples, seed=self.seed)
        return settings


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


def decoding_of(setting):
    """A `Decoding` of a `SearchConfig` (nothing more asked) or of a `Decoding`."""
    return setting if isinstance(setting, Decoding) else Decoding(setting)


def traced_as(search, sampling):
    """What a `Translator`'s trace depends on: `search` and `sampling` without the alpha
    and the temperature, which it takes at each call."""
    search = dataclasses.replace(search, alpha=0.0)
    if sampling is not None:
        sampling = dataclasses.replace(sampling, temperature=1.0)
    return search, sampling


def training_max_length(directory, metadata):
    """The `data.max_length` the model in `directory` was trained with: training pairs
    with more tokens on either side were dropped (`attncli.config.data.DataConfig`), so
    a longer sentence is one it never saw whole.

    Read from the model's `metadata` (`max_length`: the shipped demo model carries it),
    else from its run's `config.yaml` when `directory` is a run's `model/` folder; None
    when neither says.
    """
    import yaml

    from attncli.training.run_directory import RunDirectory

    given = metadata.get("max_length")
    if given is None:
        run = RunDirectory(Path(directory).parent)
        if Path(directory).name != "model" or not run.marker_path.is_file():
            return None
        try:
            config = yaml.safe_load(run.config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return None
        data = config.get("data") if isinstance(config, dict) else None
        given = data.get("max_length") if isinstance(data, dict) else None
    return given if type(given) is int and given >= 1 else None


class ServedModel:
    """What a server asks of one model, whatever engine runs it; each engine's kind of
    model is a subclass that adds `translator`, `source_lengths`, `translate` and `start`
    (and `inspect`, where the engine can show its attention).

    Args:
        name: the name requests use (`"model": name`).
        limits: the server's `Limits`.
        defaults: the model's own decoding settings (a `SearchConfig`).
        levels: the `(source, target)` tokenizer levels.
        task: `"translation"` or `"pronunciation"`. Defaults to `"translation"`.
        members: the number of runs decoded together. Defaults to 1.
        max_length: the `data.max_length` the model was trained with
            (`training_max_length`), or None when unknown. Defaults to None.

    Attributes:
        engine: the name of the engine that runs it (`ENGINES`).
        inspect_refusal: None when `/inspect` and `/step` show its attention, else the
            one line (422) that says why they cannot.
    """

    engine = None
    inspect_refusal = None

    def __init__(self, name, limits, defaults, levels, task="translation", members=1,
                 max_length=None):
        self.name = name
        self.limits = limits
        self.defaults = defaults
        self.levels = levels
        self.task = task
        self.members = members
        self.max_length = max_length
        self.greedy = dataclasses.replace(defaults, beam_size=1, n_best=1)

    def describe(self):
        """What `GET /models` says of this model."""
        return {
            "name": self.name,
            "engine": self.engine,
            "task": self.task,
            "members": self.members,
            "source_level": self.levels[0],
            "target_level": self.levels[1],
            "decoding": self.defaults.to_dict(),
            "max_length": self.max_length,
            "inspect_refusal": self.inspect_refusal,
        }

    def search(self, beam=None, alpha=None, n_best=None):
        """The run's search with a request's changes, as `attncli translate` makes it
        from `--beam`, `--alpha` and `--n-best`.

        Raises:
            RequestError: 422 for a beam past `max_beam` or settings that do not go
                together.
        """
        if beam is not None and not 1 <= beam <= self.limits.max_beam:
            raise RequestError(
                422, f"beam must be in [1, {self.limits.max_beam}]. Received: beam={beam}"
            )
        try:
            return self.defaults.adjusted(beam_size=beam, alpha=alpha, n_best=n_best)
        except ValueError as error:
            message = str(error).replace("beam_size", "beam")
            raise RequestError(422, message) from None

    def decoding(self, beam=None, alpha=None, n_best=None, prefix=None, sampling=None,
                 temperature=None, seed=None, token_log_probs=False):
        """A translation request's `Decoding`: its search (`search`), its prefix, and its
        sampling as `attncli translate --sampling` makes it (`n_best` samples per text,
        no beam). `token_log_probs`: whether the request asks for each token's log
        probability (an engine that cannot give them refuses the request).

        Raises:
            RequestError: 422 for settings that do not go together or a bad value.
        """
        if (sampling is not None and beam in (None, 1) and n_best is not None
                and not 1 <= n_best <= self.limits.max_beam):
            # Each draw is a row of the batch, as each hypothesis of a beam is. (A beam with
            # sampling is named first, by `requested_sampling`.)
            raise RequestError(422, f"n_best must be in [1, {self.limits.max_beam}] "
                               f"(--max-beam) with sampling. Received: n_best={n_best}")
        try:
            drawing = requested_sampling(SAMPLING_OPTIONS, sampling, temperature, seed, beam,
                                         n_best)
        except ValueError as error:
            raise RequestError(422, str(error)) from None
        if drawing is None:
            return Decoding(self.search(beam, alpha, n_best), prefix=prefix or "")
        return Decoding(self.search(1, alpha, 1), drawing, prefix or "", seed or 0)

    def measure(self, search, requests):
        """The cost of each text of each request (a list of lists of texts) for the
        batch budget: its source tokens times the beam (or the samples drawn); for a
        request with a text longer than the model may read or whose search may emit more
        than `max_output_tokens` tokens, a `TextTooLong` instead, and for one whose
        prefix cannot be forced, a `RequestError` (422). `search` is a `SearchConfig` or
        a `Decoding`."""
        decoding = decoding_of(search)
        if decoding.prefix:
            checked = []
            for request in requests:
                try:
                    self.translator(decoding, False).check_prefixes(
                        request, [decoding.prefix] * len(request))
                    checked.append(request)
                except PrefixError as error:
                    checked.append(RequestError(422, f"prefix: {error}"))
            if all(isinstance(item, Exception) for item in checked):
                return checked
            measured = iter(self.measure(decoding._replace(prefix=""), [
                request for request in checked if not isinstance(request, Exception)]))
            return [item if isinstance(item, Exception) else next(measured)
                    for item in checked]
        search = decoding.search
        drawing = decoding.sampling
        copies = search.beam_size if drawing is None else drawing.samples
        lengths = self.source_lengths([text for request in requests for text in request])
        measured, start = [], 0
        for request in requests:
            measured.append(self._costs(search, copies, lengths[start : start + len(request)]))
            start += len(request)
        return measured

    def _costs(self, search, copies, lengths):
        for position, length in enumerate(lengths):
            refusal = self.too_long(length)
            if refusal is not None:
                return TextTooLong(position, refusal)
            longest = math.ceil(search.max_length_ratio * length) + search.max_length_offset
            if longest > self.limits.max_output_tokens:
                return TextTooLong(
                    position, f"its {length} source tokens may translate into {longest} "
                    f"tokens, more than {self.limits.max_output_tokens} "
                    "(--max-output-tokens); split it")
        return [max(length, 1) * copies for length in lengths]

    def too_long(self, length):
        """Why a text of `length` source tokens is more than the model reads (None: it
        is not)."""
        return None

    def inspect(self, text, search, reference=None):
        """The `SentenceView` of `text` (see `TensorFlowModel.inspect`).

        Raises:
            RequestError: 422, `inspect_refusal`, when the model cannot show it.
        """
        raise RequestError(422, self.inspect_refusal)


class TensorFlowModel(ServedModel):
    """A run (or an ensemble of runs) searched by attncli, with TensorFlow: every
    request's settings, and every attention, layer and head of a sentence (`inspect`).

    Args:
        name: the name requests use (`"model": name`).
        loaded: the `LoadedModel` (its `model` an `Ensemble` for several runs).
        members: the number of runs decoded together.
        limits: the server's `Limits`.
        max_length: the `data.max_length` the model was trained with
            (`training_max_length`), or None when unknown. Defaults to None.
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
            key, _ = traced_as(search, None)
            if key not in self._started:
                self._started[key] = self._translator(search, False)
                self._started[key].translate(["."])
        self.measure(self.defaults, [["."]])
        if self.members == 1:
            force(self.translator(self.defaults, False), ["."], ["."])

    @forward_only
    def translator(self, search, weights):
        """The `Translator` of `search` (a `SearchConfig` or a `Decoding`: its search and
        sampling), with attention weights if `weights`."""
        search, sampling = decoding_of(search)[:2]
        traced = traced_as(search, sampling)
        if not weights and sampling is None and traced[0] in self._started:
            return self._started[traced[0]]
        key = (*traced, weights)
        if key in self._translators:
            self._translators.move_to_end(key)
        else:
            translator = self._translator(search, weights, sampling)
            translator.translate(["."])  # traced now
            self._translators[key] = translator
            if len(self._translators) > KEPT_TRANSLATORS:
                self._translators.popitem(last=False)
        return self._translators[key]

    def _translator(self, search, weights, sampling=None):
        return self.loaded.translator(search, attention_weights=weights, sampling=sampling,
                                      settings=True)

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
        decoding = decoding_of(search)
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
                                                 alpha=decoding_of(search).search.alpha)
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


def load_tensorflow_model(name, directories, limits):
    """The `TensorFlowModel` of the runs' model `directories` (several: an ensemble)."""
    import tensorflow as tf

    from attncli.search.ensemble import load_ensemble

    # Each search a request asks for is traced once, by design: TensorFlow's warning that
    # many functions were traced says nothing to act on here.
    tf.get_logger().setLevel("ERROR")
    loaded = load_ensemble(directories)
    return TensorFlowModel(name, loaded, len(directories), limits,
                           training_max_length(directories[0], loaded.metadata))


def load_exported_model(name, directories, limits, compute_type="float32"):
    """The `ExportedModel` of a CTranslate2 export (`directories`: the one export),
    its weights loaded as `compute_type` (`"float32"` or `"int8"`)."""
    from attncli.serve.exported_model import ExportedModel

    [directory] = directories
    return ExportedModel.load(name, directory, limits, compute_type)


class Engine(NamedTuple):
    """What runs a server's models.

    Attributes:
        load: `load(name, directories, limits, **options)` -> its `ServedModel`, on the
            batcher's thread.
        tensorflow: whether it runs TensorFlow (the server imports it, quietly, first).
    """

    load: Callable
    tensorflow: bool


#: The engines a server runs its models with, by `--engine` name.
ENGINES = {
    "tensorflow": Engine(load_tensorflow_model, tensorflow=True),
    "ctranslate2": Engine(load_exported_model, tensorflow=False),
}


class Registry:
    """The models of one server, by name; the first is the default.

    Args:
        specs: `(name, [model directory, ...])` pairs, in order; several directories
            are decoded as an ensemble.
        limits: the server's `Limits`.
        engine: the name of the engine every model runs on (`ENGINES`). Defaults to
            `"tensorflow"`.
        options: the engine's options, e.g. `{"compute_type": "int8"}` for
            `"ctranslate2"`. Defaults to none.
    """

    def __init__(self, specs, limits, engine="tensorflow", options=None):
        self.specs = list(specs)
        self.limits = limits
        self.engine = ENGINES[engine]
        self.options = dict(options or {})
        self.default = self.specs[0][0]
        self.models = {}
        self.ready = False

    def load(self, report=None):
        """Load every model and trace its searches; `report(line)` says what is done."""
        for name, directories in self.specs:
            model = self.engine.load(name, directories, self.limits, **self.options)
            model.start()
            self.models[name] = model
            if report is not None:
                report(f"model {name!r} loaded and traced")
        self.ready = True

    def get(self, name):
        """The model named `name` (None: the default).

        Raises:
            RequestError: 404 when no model has that name.
        """
        if name is None:
            name = self.default
        try:
            return self.models[name]
        except KeyError:
            names = ", ".join(repr(spec[0]) for spec in self.specs)
            raise RequestError(
                404, f"no model named {shown(name, 40)}; this server has {names}"
            ) from None
