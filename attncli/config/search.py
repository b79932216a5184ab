"""The settings of a search, validated when they are set (no TensorFlow here)."""

import dataclasses
import math
import typing

from attncli.errors import clipped, shown

# The longest translations a search may be asked for: a translation this many times
# its source's length, plus this many tokens.
MAX_LENGTH_RATIO = 1000
MAX_LENGTH_OFFSET = 100_000

SAMPLING_METHODS = ("random", "topk", "topp")
MAX_SAMPLES = 100  # translations drawn per sentence
MAX_TOP_K = 2**31 - 1  # topk:K, an int32 in the graph
MIN_TEMPERATURE = 0.001  # below it, logit / T overflows float64 for large logits
MAX_TEMPERATURE = 100.0
MAX_SEED = 2**63 - 1


def _check_range(name, value, low, high):
    """Refuse `value` unless it is a finite number in [low, high]: one line naming `name`."""
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(
            f"{name} must be a number in [{low:g}, {high:g}]. Received: {name}={value}"
        )


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """How `attncli.search.decoding.compile_search` turns a source sentence into hypotheses.

    Args:
        beam_size: int >= 1; 1 is greedy search. Defaults to 1.
        alpha: the exponent of the length penalty `lp(Y) = ((5 + |Y|) / 6) ** alpha`
            (Wu et al. 2016); hypotheses are ranked by `log P(Y | X) / lp(Y)`, and `0`
            ranks by `log P` alone. Defaults to 0.6.
        n_best: int in `[1, beam_size]`, hypotheses returned per sentence, or None for
            `beam_size` (see `returned`). Defaults to 1, whatever the beam: a larger
            beam searches wider and still returns the best hypothesis alone.
        max_length_ratio: float in [0, 1000]; a sentence's translation has at most
            `ceil(max_length_ratio * source_length) + max_length_offset` tokens.
            Defaults to 2.0.
        max_length_offset: int in [1, 100000]. Defaults to 10.
    """

    beam_size: int = 1
    alpha: float = 0.6
    n_best: int | None = 1
    max_length_ratio: float = 2.0
    max_length_offset: int = 10

    def __post_init__(self):
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be >= 1. Received: beam_size={self.beam_size}")
        n_best = self.returned
        if not 1 <= n_best <= self.beam_size:
            raise ValueError(
                f"n_best must be in [1, beam_size={self.beam_size}]. Received: n_best={n_best}"
            )
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0. Received: alpha={self.alpha}")
        # The bound is computed in int32 (`max_target_lengths`): both terms stay far below.
        _check_range("max_length_ratio", self.max_length_ratio, 0, MAX_LENGTH_RATIO)
        if not 1 <= self.max_length_offset <= MAX_LENGTH_OFFSET:
            raise ValueError(
                f"max_length_offset must be in [1, {MAX_LENGTH_OFFSET}]. "
                f"Received: max_length_offset={clipped(str(self.max_length_offset))}"
            )

    @property
    def returned(self):
        """The number of hypotheses returned per sentence: `n_best`, or `beam_size` if None."""
        return self.beam_size if self.n_best is None else self.n_best

    def adjusted(self, beam_size=None, alpha=None, n_best=None):
        """These settings with those given (not None) replaced, checked as any are.

        A narrower beam than this `n_best` without an `n_best` of its own returns the
        whole beam: `SearchConfig(beam_size=5, n_best=3).adjusted(beam_size=2)` has
        `n_best` 2.

        Raises:
            ValueError: the settings do not go together (see the class).
        """
        changes = {}
        if beam_size is not None:
            changes["beam_size"] = beam_size
            if n_best is None and self.n_best is not None and self.n_best > beam_size:
                changes["n_best"] = beam_size
        if alpha is not None:
            changes["alpha"] = alpha
        if n_best is not None:
            changes["n_best"] = n_best
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The plain dict of every field, as the `decoding` section of a run stores it."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Sampling:
    """Translations drawn at random from the model, in place of a search for the best.

    At every step the next token is drawn from the model's distribution over the tokens
    it can emit, divided by a temperature and cut to its most probable tokens, then
    renormalised (as fairseq's `--sampling-topk` / `--sampling-topp` and OpenNMT-py's
    `random_sampling_topk` / `random_sampling_topp` define it):

        q(y) ∝ exp(logit(y) / temperature)   over the kept tokens, 0 elsewhere

    - `random`: every token is kept (the whole distribution).
    - `topk`: the `top_k` most probable tokens (ties: the lower id first).
    - `topp`: the nucleus of Holtzman et al. 2019, the fewest most probable tokens whose
      probabilities under the tempered distribution add up to `top_p` or more.

    The temperature is applied before the cut, so it changes which tokens `topp` keeps
    (not those of `topk`). Each sentence gets `samples` translations, drawn
    independently; there is no beam. Not a setting of a run's `decoding` section, which
    also scores validation during training: sampling is asked for by a command or a
    request. The random numbers come from the seed given with the sentences
    (`attncli.search.sampling`), not from here, so one traced search serves every seed.

    Args:
        method: `"random"`, `"topk"` or `"topp"`. Defaults to `"random"`.
        top_k: int >= 1 for `topk`, None otherwise.
        top_p: float in (0, 1] for `topp`, None otherwise.
        temperature: float in [0.001, 100]; 1 is the model's own distribution, lower sharpens
            it, higher flattens it. Defaults to 1.0.
        samples: int in [1, 100], translations drawn per sentence. Defaults to 1.
    """

    method: str = "random"
    top_k: int | None = None
    top_p: float | None = None
    temperature: float = 1.0
    samples: int = 1

    def __post_init__(self):
        if self.method not in SAMPLING_METHODS:
            raise ValueError(
                f"sampling must be one of random, topk:K, topp:P. "
                f"Received: sampling={clipped(str(self.method))}"
            )
        if (self.top_k is not None) != (self.method == "topk"):
            raise ValueError(f"top_k goes with topk sampling only. Received: top_k={self.top_k}, "
                             f"method={self.method}")
        if (self.top_p is not None) != (self.method == "topp"):
            raise ValueError(f"top_p goes with topp sampling only. Received: top_p={self.top_p}, "
                             f"method={self.method}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"topk:K needs an integer K >= 1. Received: K={self.top_k}")
        if self.top_k is not None and self.top_k > MAX_TOP_K:
            # K is an int32 in the search's graph (which takes min(K, vocabulary size)).
            raise ValueError(f"topk:K needs K <= {MAX_TOP_K} (a K past the vocabulary's "
                             f"size keeps every token). Received: K={shown(self.top_k)}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"topp:P needs a number P in (0, 1]. Received: P={self.top_p}")
        _check_range("temperature", self.temperature, MIN_TEMPERATURE, MAX_TEMPERATURE)
        if not 1 <= self.samples <= MAX_SAMPLES:
            raise ValueError(
                f"samples must be in [1, {MAX_SAMPLES}]. Received: samples={self.samples}"
            )

    @classmethod
    def parse(cls, text, temperature=1.0, samples=1):
        """The `Sampling` written `random`, `topk:K` or `topp:P` (as `--sampling` takes it).

        Raises:
            ValueError: one line saying what is wrong.
        """
        method, colon, value = str(text).partition(":")
        if method == "random" and not colon:
            return cls("random", temperature=temperature, samples=samples)
        if method in ("topk", "topp") and value:
            try:
                number = int(value) if method == "topk" else float(value)
            except ValueError:
                number = None
            if number is not None:
                option = {"top_k" if method == "topk" else "top_p": number}
                return cls(method, **option, temperature=temperature, samples=samples)
        raise ValueError(
            "sampling is random, topk:K (K an integer >= 1) or topp:P (P in (0, 1]). "
            f"Received: {clipped(str(text))}"
        )

    def __str__(self):
        """As `parse` reads it: `random`, `topk:K` or `topp:P`."""
        if self.method == "topk":
            return f"topk:{self.top_k}"
        if self.method == "topp":
            return f"topp:{self.top_p:g}"
        return "random"


@dataclasses.dataclass(frozen=True)
class SamplingOptions:
    """How a front end spells the options of sampling, so that `requested_sampling`'s
    messages name them as its user wrote them.

    Args:
        sampling, temperature, seed, beam, n_best: each option's name (`"--n-best"` on
            the command line, `"n_best"` in a request).
        asking: how sampling is asked for, in the front end's words.
        per: what each of `n_best` draws translates (`"line"`, `"text"`).
        value_prefix: put before what `Sampling` says of a bad value.
    """

    sampling: str
    temperature: str
    seed: str
    beam: str
    n_best: str
    asking: str
    per: str
    value_prefix: str = ""


def requested_sampling(options, sampling, temperature, seed, beam, n_best):
    """The `Sampling` a command or request asks for with `sampling` (`random`, `topk:K`,
    `topp:P`), `temperature` and `n_best` draws; None without `sampling`.

    Sampling draws each translation on its own: `beam` (other than 1) does not go with
    it, nor `temperature` and `seed` without it. `seed` is in [0, 2**63 - 1].

    Args:
        options: the front end's `SamplingOptions` (how its messages name the options).
        sampling, temperature, seed, beam, n_best: as given, None where not given.

    Raises:
        ValueError: one line naming the option as `options` spells it.
    """
    if sampling is None:
        for name, value in ((options.temperature, temperature), (options.seed, seed)):
            if value is not None:
                raise ValueError(f"{name} applies to sampling: add {options.asking}, or drop it")
        return None
    if beam is not None and beam != 1:
        raise ValueError(
            f"{options.beam} {beam} and {options.sampling}: sampling draws each translation "
            f"on its own, without a beam; drop {options.beam} ({options.n_best} N draws N "
            f"translations per {options.per})"
        )
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise ValueError(
            f"{options.seed} must be in [0, 2**63 - 1]. Received: {options.seed}={seed}"
        )
    try:
        return Sampling.parse(sampling, 1.0 if temperature is None else temperature,
                              1 if n_best is None else n_best)
    except ValueError as error:
        message = str(error)
        for field, name in (("samples", options.n_best), ("temperature", options.temperature)):
            message = message.replace(f"{field} must", f"{name} must").replace(
                f"Received: {field}=", f"Received: {name}=")
        raise ValueError(options.value_prefix + message) from None


class SearchSettingError(ValueError):
    """A request's beam, alpha and n-best do not go with each other or the run's search
    (`SearchConfig.adjusted`'s message), as distinct from its sampling options'."""


class Decoding(typing.NamedTuple):
    """How a command or a request asks for translations: the one object every front end
    (`attncli translate`, the server, `attncli export`) makes of its options
    (`requested_decoding`) and hands whole to the search (`attncli.search.translation.Translator`).
    Hashable: the server merges requests that decode alike.

    Attributes:
        search: the `SearchConfig`. Defaults to `SearchConfig()` (greedy).
        sampling: a `Sampling` drawing the translations instead, or None (search).
        prefix: what every translation begins with ("" for nothing).
        seed: the sampling's seed.
    """

    search: SearchConfig = SearchConfig()
    sampling: Sampling | None = None
    prefix: str = ""
    seed: int = 0

    @classmethod
    def of(cls, setting):
        """`setting` as a `Decoding`: a `SearchConfig` searches with nothing more asked,
        None is `Decoding()`."""
        if setting is None:
            return cls()
        return setting if isinstance(setting, Decoding) else cls(setting)

    @property
    def returned(self):
        """Translations per sentence: the samples drawn, or the search's `n_best`."""
        return self.sampling.samples if self.sampling is not None else self.search.returned

    def to_dict(self):
        """The search's settings, and the prefix and sampling when asked for."""
        settings = self.search.to_dict()
        if self.prefix:
            settings["prefix"] = self.prefix
        if self.sampling is not None:
            settings.update(sampling=str(self.sampling), temperature=self.sampling.temperature,
                            samples=self.sampling.samples, seed=self.seed)
        return settings


def requested_decoding(defaults, options, *, beam=None, alpha=None, n_best=None,
                       sampling=None, temperature=None, seed=None, prefix=None):
    """The `Decoding` a command or request asks for: the run's search `defaults` with its
    `beam`, `alpha` and `n_best` (`SearchConfig.adjusted`), or, with `sampling`, `n_best`
    draws at `temperature` (`requested_sampling`: a greedy search's alpha and lengths,
    no beam); each translation begins with `prefix`. Options not given are None.

    Raises:
        ValueError: a sampling option is wrong, in one line naming it as `options`
            spells it; `SearchSettingError` (a `ValueError`) when the search settings do
            not go together.
    """
    drawing = requested_sampling(options, sampling, temperature, seed, beam, n_best)
    try:
        if drawing is None:
            search = defaults.adjusted(beam_size=beam, alpha=alpha, n_best=n_best)
        else:
            search = defaults.adjusted(beam_size=1, alpha=alpha, n_best=1)
    except ValueError as error:
        raise SearchSettingError(str(error)) from None
    return Decoding(search, drawing, prefix or "", seed or 0)
