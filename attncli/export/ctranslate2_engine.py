"""Translating with a CTranslate2 export (`attncli export RUN DIR --format ctranslate2`),
without TensorFlow.

    engine = ExportedTranslator("exported/spa-eng")
    [translation] = engine.translate(["Hace frío."])

Sentences are tokenised by the run's own tokenizer files (`PlainTokenizer`), translated by
`ctranslate2.Translator` and detokenised; the results are those of
`attncli.search.translation.Translator` (same fields), searched as attncli searches:

- Greedy: CTranslate2's greedy search, with no minimum length (attncli may emit `[END]`
  first) and `[END]` returned, so `|Y|` counts it as attncli does.
- Each sentence stops at `ceil(max_length_ratio * source_tokens) + max_length_offset`
  tokens, its own bound: sentences of one source length go to CTranslate2 together, with
  that bound as `max_decoding_length`.
- Scores are attncli's, `log P(Y | X) / lp(Y)` with `lp(Y) = ((5 + |Y|) / 6) ** alpha`
  (Wu et al. 2016): CTranslate2 returns `log P` (no length penalty of its own), and the
  hypotheses are ranked here by that score.
- Beam: CTranslate2's beam search differs from attncli's (finished hypotheses leave its
  beam, which is refilled from the next candidates; it ranks by `log P` and stops when the
  best candidate has ended and `beam_size` hypotheses have). It returns its `beam_size`
  hypotheses, ranked here by attncli's score. On the 2,000 spa-eng validation sentences
  the best of them was attncli's in 1,997 (docs/export.md); the export checks it on its
  sample sentences.

- Prefixes: CTranslate2's `target_prefix`, the prefix's tokens forced, then the search goes
  on; the maximum length counts them, as attncli's does. CTranslate2's score leaves the
  prefix out: its `log P` (`score_batch`, teacher-forced) is added, so that `log P` is the
  whole translation's and `|Y|` counts the prefix, as attncli scores it. A prefix that
  cannot be forced is refused as attncli refuses it (`attncli.search.prefixes`).

A sentence with no source token at all (every character dropped by the normalisation) is
translated as empty: CTranslate2 does not decode it, where attncli's model writes a
sentence from a source it cannot see.
"""

import copy

import json
import math
import os
from pathlib import Path

import numpy as np

from attncli.config.schema import ConfigError, from_mapping
from attncli.config.search import SearchConfig
from attncli.data.text_rules import END_TOKEN, UNK_TOKEN
from attncli.errors import AttncliError, shown
from attncli.export.plain_tokenizer import PlainTokenizer
from attncli.search.hypotheses import Hypothesis, Translation
from attncli.search.prefixes import check_tokens, check_written

FORMAT = "attncli-ctranslate2"
VERSION = 1
SETTINGS_FILE = "attncli-ctranslate2.json"
COMPUTE_TYPES = ("float32", "int8")


def is_export(path):
    """Whether `path` is a directory `attncli export --format ctranslate2` wrote."""
    return (Path(path) / SETTINGS_FILE).is_file()


def check_compute_type(compute_type):
    """Refuse a `--compute-type` that is none of `COMPUTE_TYPES`, in one line."""
    if compute_type not in COMPUTE_TYPES:
        raise AttncliError(f"--compute-type {shown(compute_type)} is not one; choose "
                           f"{' or '.join(COMPUTE_TYPES)}")


def read_settings(directory):
    """The export's `attncli-ctranslate2.json`: source_end, decoding (a `SearchConfig`),
    source_positions, run."""
    path = Path(directory) / SETTINGS_FILE
    try:
        settings = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise AttncliError(f"{directory} is no CTranslate2 export of attncli (no "
                           f"{SETTINGS_FILE}); write one with `attncli export RUN DIR "
                           "--format ctranslate2`") from None
    except (OSError, ValueError) as error:
        raise AttncliError(f"cannot read {path} ({error}); export the run again") from None
    if not isinstance(settings, dict) or settings.get("format") != FORMAT:
        raise AttncliError(f"{path} is damaged; export the run again")
    if settings.get("version") != VERSION:
        raise AttncliError(f"{path} has version {shown(settings.get('version'))}; this "
                           f"attncli reads version {VERSION}: export the run again")
    try:
        settings["decoding"] = from_mapping(SearchConfig, settings["decoding"], "decoding")
    except (ConfigError, KeyError) as error:
        raise AttncliError(f"{path} is damaged ({error}); export the run again") from None
    return settings


def intra_threads():
    """The cores this process may run on (`taskset` is respected; CTranslate2's own default
    counts the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return 0


class ExportedTranslator:
    """A CTranslate2 export loaded for translation (see the module), with the interface
    of `attncli.search.translation.Translator.translate`.

    Args:
        directory: what `attncli export RUN DIR --format ctranslate2` wrote.
        compute_type: `"float32"` or `"int8"` (weights quantised to 8 bits when loaded,
            CTranslate2's `int8`; not exact). Defaults to `"float32"`.
        search: a `SearchConfig`, or None for the export's own decoding settings
            (`exported_search`). Defaults to None.
        attention_weights: bool, give each hypothesis the last block's cross-attention
            weights averaged over the heads, `(len(tokens), len(source_tokens))` (None
            otherwise). Defaults to False.

    Attributes:
        search: the `SearchConfig` it translates with.
        exported_search: the run's decoding settings, as exported.
        source_end: bool, `[END]` is appended to each source, as the model was trained.
        source_positions: int, the most source tokens the model reads.

    Example:

    >>> engine = ExportedTranslator("exported/spa-eng")
    >>> [translation] = engine.translate(["Hace frío."])
    >>> translation.hypotheses[0].text
    "it's cold."
    """

    def __init__(self, directory, compute_type="float32", search=None, attention_weights=False):
        import ctranslate2

        check_compute_type(compute_type)
        settings = read_settings(directory)
        self.exported_search = settings["decoding"]
        self.search = self.exported_search if search is None else search
        self.attention_weights = attention_weights
        self.source_end = settings["source_end"]
        self.source_positions = settings["source_positions"]
        self.source_tokenizer = PlainTokenizer.load(directory, "source")
        self.target_tokenizer = PlainTokenizer.load(directory, "target")
        try:
            self.translator = ctranslate2.Translator(
                str(directory), device="cpu", compute_type=compute_type,
                inter_threads=1, intra_threads=intra_threads(),
            )
        except (RuntimeError, ValueError) as error:
            raise AttncliError(f"CTranslate2 cannot load {directory} ({error}); export the "
                               "run again") from None

    def adjusted(self, search=None, attention_weights=None):
        """This translator with another `search` or `attention_weights` (None: its own),
        sharing its loaded model and tokenizers."""
        other = copy.copy(self)
        if search is not None:
            other.search = search
        if attention_weights is not None:
            other.attention_weights = attention_weights
        return other

    def source_tokens(self, text):
        """The tokens the model reads for `text` (`[END]` appended if it was trained so)."""
        return self.source_tokenizer.tokenize(text) + ([END_TOKEN] if self.source_end else [])

    def check_prefixes(self, texts, prefixes):
        """Raises `attncli.search.prefixes.PrefixError` (one line) for the first prefix
        that cannot be forced on its text's translation, as `Translator.check_prefixes`
        does; a blank prefix forces nothing."""
        known = self.target_tokenizer.vocabulary - {UNK_TOKEN}
        for index, (text, prefix) in enumerate(zip(texts, prefixes)):
            if prefix.strip():
                check_written(prefix, index)
                check_tokens(prefix, self.target_tokenizer.tokenize(prefix), known, text,
                             len(self.source_tokens(text)), self.search, index)

    def prefix_tokens(self, prefix):
        """The target tokens `prefix` forces (a word the vocabulary lacks as `[UNK]`), or
        None for a blank prefix."""
        if not prefix.strip():
            return None
        vocabulary = self.target_tokenizer.vocabulary
        return [token if token in vocabulary else UNK_TOKEN
                for token in self.target_tokenizer.tokenize(prefix)]

    def translate(self, texts, batch_size=64, prefixes=None, seeds=None):
        """The `Translation` of each text, in order, each beginning with its prefix
        (`prefixes`: one per text, "" for none; None: none), checked first
        (`check_prefixes`). `seeds` are not read (it does not sample)."""
        search = self.search
        if prefixes is None:
            prefixes = [""] * len(texts)
        self.check_prefixes(texts, prefixes)
        sources = [self.source_tokens(text) for text in texts]
        for text, tokens in zip(texts, sources):
            if len(tokens) > self.source_positions:
                raise AttncliError(
                    f"{shown(text)} has {len(tokens)} tokens; the export reads at most "
                    f"{self.source_positions}: split the sentence"
                )
        by_bound = {}
        for index, tokens in enumerate(sources):
            by_bound.setdefault(self.longest_target(len(tokens), search), []).append(index)
        results = [None] * len(texts)
        for bound, indices in by_bound.items():
            # An empty source is not decoded (see the module), prefix or not.
            forced = [self.prefix_tokens(prefixes[index]) if sources[index] else None
                      for index in indices]
            found = self.translator.translate_batch(
                [sources[index] for index in indices],
                target_prefix=forced if any(forced) else None, max_batch_size=batch_size,
                beam_size=search.beam_size, num_hypotheses=search.beam_size,
                length_penalty=0, max_decoding_length=bound, min_decoding_length=0,
                max_input_length=0, return_end_token=True, return_scores=True,
                return_attention=self.attention_weights,
            )
            prefix_log_probs = self.prefix_log_probs([sources[index] for index in indices],
                                                     forced, batch_size)
            for index, result, prefix_log_prob in zip(indices, found, prefix_log_probs):
                source_length = len(sources[index]) if self.attention_weights else None
                results[index] = Translation(
                    texts[index], sources[index],
                    self.best(result, search, source_length, prefix_log_prob))
        return results

    def prefix_log_probs(self, sources, forced, batch_size):
        """`log P` of each forced prefix (a list of tokens, or None: 0) given its source,
        teacher-forced: what CTranslate2's score of a prefixed translation leaves out."""
        rows = [row for row, tokens in enumerate(forced) if tokens]
        log_probs = [0.0] * len(sources)
        if rows:
            scored = self.translator.score_batch(
                [sources[row] for row in rows], [forced[row] for row in rows],
                max_batch_size=batch_size, max_input_length=0)
            for row, result in zip(rows, scored):
                # the prefix's tokens, without the [END] score_batch scores after them
                log_probs[row] = float(np.sum(result.log_probs[: len(forced[row])],
                                              dtype=np.float32))
        return log_probs

    def longest_target(self, source_length, search):
        return longest_target(source_length, search.max_length_ratio, search.max_length_offset)

    def best(self, result, search, source_length=None, prefix_log_prob=0.0):
        """The `search.returned` best hypotheses of a CTranslate2 result by attncli's
        score, best first (CTranslate2's order, by `log P`, among equal scores); with
        `source_length`, each with its attention weights. `prefix_log_prob`: the `log P`
        of a forced prefix, which CTranslate2's scores leave out."""
        hypotheses = []
        for rank, (tokens, log_prob) in enumerate(zip(result.hypotheses, result.scores)):
            # float32, as the search computes it (attncli.search.search_steps)
            penalty = np.power(np.float32(5.0 + len(tokens)) / np.float32(6.0),
                               np.float32(search.alpha))
            text_tokens = tokens[:-1] if tokens and tokens[-1] == END_TOKEN else tokens
            weights = None
            if source_length is not None:
                weights = np.asarray(result.attention[rank], np.float32).reshape(
                    len(tokens), source_length)
            hypotheses.append(Hypothesis(
                text=self.target_tokenizer.detokenize(text_tokens), tokens=list(tokens),
                score=float((np.float32(log_prob) + np.float32(prefix_log_prob)) / penalty),
                weights=weights,
            ))
        order = sorted(range(len(hypotheses)), key=lambda rank: -hypotheses[rank].score)
        return [hypotheses[rank] for rank in order[: search.returned]]


def longest_target(source_tokens, max_length_ratio, max_length_offset):
    """The most tokens a translation of `source_tokens` tokens may have,
    `ceil(max_length_ratio * source_tokens) + max_length_offset`, in float32 as the search
    computes it (`attncli.search.search_steps.max_target_lengths`)."""
    scaled = np.float32(max_length_ratio) * np.float32(source_tokens)
    return math.ceil(float(scaled)) + max_length_offset
