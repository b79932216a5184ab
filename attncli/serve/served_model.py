"""What a server asks of one model, whatever engine runs it: `ServedModel`.

A translation request's `Decoding` (`attncli.config.search`) is the model's decoding
settings with the request's `beam`, `alpha` and `n_best` applied, or its sampling and
seed, and its prefix, made by `requested_decoding` as `attncli translate` makes its own.
What every engine does the same way (a request's `Decoding`, the cost of its texts, what
`/models` says) is written here once; each engine's kind of model (`attncli.serve.tensorflow_model`,
`attncli.serve.exported_model`) adds how it translates.

Every method that translates is called on the batcher's worker thread.
"""

import dataclasses
import math

from attncli.config.search import (
    Decoding, SamplingOptions, SearchSettingError, requested_decoding, requested_sampling,
)
from attncli.search.prefixes import PrefixError
from attncli.serve.limits import RequestError

#: Sentences per search call: a batch is sorted by length and cut into calls of this
#: many, as `attncli translate` does (similar lengths pad less).
TRANSLATE_BATCH = 64
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

    def refusal(self, where):
        """The `RequestError` (413) saying so of the text named `where` (`texts[2]`)."""
        return RequestError(413, f"{where}: {self.why}")


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
        max_length: the `data.max_length` the model was trained with (read by
            `attncli.serve.registry.training_max_length`), or None when unknown.
            Defaults to None.

    Attributes:
        engine: the name of the engine that runs it (`attncli.serve.registry.ENGINES`).
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
        """What `GET /models` says of this model: a `schemas.ModelDescription`."""
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

    def decoding(self, beam=None, alpha=None, n_best=None, prefix=None, sampling=None,
                 temperature=None, seed=None, token_log_probs=False):
        """A translation request's `Decoding` (`requested_decoding`): the model's search
        with the request's `beam`, `alpha` and `n_best`, or its sampling (`n_best` draws
        per text, no beam), and its prefix, as `attncli translate` makes them from its
        options. `token_log_probs`: whether the request asks for each token's log
        probability (an engine that cannot give them refuses the request).

        Raises:
            RequestError: 422 for a beam past `max_beam`, settings that do not go
                together, or a bad value.
        """
        if (sampling is not None and beam in (None, 1) and n_best is not None
                and not 1 <= n_best <= self.limits.max_beam):
            # Each draw is a row of the batch, as each hypothesis of a beam is. (A beam with
            # sampling is named first, by `requested_sampling`.)
            raise RequestError(422, f"n_best must be in [1, {self.limits.max_beam}] "
                               f"(--max-beam) with sampling. Received: n_best={n_best}")
        try:
            # The sampling options first, then the beam's limit, as before any search.
            requested_sampling(SAMPLING_OPTIONS, sampling, temperature, seed, beam, n_best)
        except ValueError as error:
            raise RequestError(422, str(error)) from None
        if sampling is None and beam is not None and not 1 <= beam <= self.limits.max_beam:
            raise RequestError(
                422, f"beam must be in [1, {self.limits.max_beam}]. Received: beam={beam}"
            )
        try:
            return requested_decoding(
                self.defaults, SAMPLING_OPTIONS, beam=beam, alpha=alpha, n_best=n_best,
                sampling=sampling, temperature=temperature, seed=seed, prefix=prefix,
            )
        except SearchSettingError as error:
            raise RequestError(422, str(error).replace("beam_size", "beam")) from None
        except ValueError as error:
            raise RequestError(422, str(error)) from None

    def measure(self, search, requests):
        """The cost of each text of each request (a list of lists of texts) for the
        batch budget: its source tokens times the beam (or the samples drawn); for a
        request with a text longer than the model may read or whose search may emit more
        than `max_output_tokens` tokens, a `TextTooLong` instead, and for one whose
        prefix cannot be forced, a `RequestError` (422). `search` is a `SearchConfig` or
        a `Decoding`."""
        decoding = Decoding.of(search)
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
