"""`attncli export RUN DIR [--format FORMAT]`: the run's model in a format other programs
run, checked in a fresh process. `FORMATS` lists them, each an `ExportFormat`: its
description, the options it takes beyond RUN, DIR, `--beam`, `--alpha`, `--n-best` and
`--sample`, and the function that writes and checks it.

`savedmodel` (the default): the SavedModel (`attncli.search.serving`) translates strings
to strings with a `greedy` and a `beam` signature, the same with a prefix per sentence
(`greedy_prefix`, `beam_prefix`) and a `sample` signature that draws a translation with a
seed per sentence; the beam's width, alpha, n-best and maximum length are the run's
decoding settings unless `--beam`, `--alpha` or `--n-best` change them, as in `attncli
translate`, and the sampling is `--sampling` and `--temperature`'s (the whole
distribution at temperature 1 by default); with `--ensemble OTHER_RUN` (repeatable) the
graph decodes RUN and the other runs as one ensemble, as `attncli translate --ensemble`
does. DIR must be new or empty: the export is written into a temporary directory beside
it and takes its name with one rename once it has passed its check, so DIR never holds
half an export and nothing of the user's is ever replaced.

The check: a fresh Python (`python -I`: neither the current directory nor PYTHONPATH
on its path) imports TensorFlow and tensorflow-text only, loads the export, asserts
that attncli was not imported, and translates the sample sentences with both
signatures (those with prefixes given the first word of each greedy translation as its
prefix, `sample` seed 0); the translations must equal what `attncli translate`
prints for them here.
The sample sentences are `--sample`'s, else the first two of the run's validation split
(real text, so a subword tokenizer is checked on `##` pieces), else the most frequent
words of the source vocabulary. What it found goes to stderr; stdout stays empty.

`ctranslate2`: a CTranslate2 model directory, for Transformer models only
(`attncli.export.ctranslate2_export` says what it holds and how it is checked: greedy and
beam translations of `CTRANSLATE2_SAMPLES` validation sentences, by a fresh Python without
TensorFlow, equal to `attncli translate`'s). It is written and renamed into place as the
SavedModel is.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, NamedTuple

from attncli.cli.runs import model_directory, search_config, translate_lines
from attncli.config.search import Sampling
from attncli.errors import AttncliError, clipped, shown
from attncli.files import clear_abandoned, vacant

SAMPLE_LENGTHS = (3, 6)  # words of the two default sample sentences
CTRANSLATE2_SAMPLES = 20  # validation sentences the ctranslate2 export is checked on

# Run by `python -I -c` in the check: TensorFlow and tensorflow-text only.
CHECK = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the tokenizers' ops
exported = tf.saved_model.load(sys.argv[1])
request = json.loads(sys.stdin.read())
results = {}
for name, inputs in request["signatures"].items():
    arguments = {key: tf.constant(request[key], tf.int64 if key == "seeds" else tf.string)
                 for key in ["texts", *inputs]}
    outputs = exported.signatures[name](**arguments)
    results[name] = [text.decode("utf-8") for text in outputs["translation"].numpy()]
assert "attncli" not in sys.modules, "the export imported attncli"
print(json.dumps(results))
"""


def sample_sentences(tokenizer, run_path=None):
    """Two source sentences for the check: the first two of the run's validation split
    when `run_path` is a run whose data can still be read, else made of the most
    frequent words of the vocabulary (`vocabulary_sentences`)."""
    sentences = validation_sentences(run_path) if run_path is not None else []
    return sentences or vocabulary_sentences(tokenizer)


def validation_sentences(run_path, count=2):
    """The first `count` sources of the validation split of the run at `run_path`, or
    [] when it is no run directory or its data cannot be read."""
    from attncli.config.run import load_run_config
    from attncli.data.sources import read_splits

    config_path = Path(run_path) / "config.yaml"
    if not config_path.is_file():
        return []
    try:
        splits = read_splits(load_run_config(config_path).data)
    except (AttncliError, OSError, ValueError):
        return []
    return [source for source in splits.valid.sources if source.strip()][:count]


def vocabulary_sentences(tokenizer):
    """Two source sentences of the most frequent words of the vocabulary: the first
    `SAMPLE_LENGTHS[0]`, then the next `SAMPLE_LENGTHS[1]`.

    A word is a token with a letter or digit that continues no other (`##`). A subword
    vocabulary begins with its single characters (`a`, `b`, `0`), which are no test of
    its tokenizer: its words are its pieces of two characters or more.
    """
    from attncli.data.text_rules import SUFFIX_INDICATOR
    from attncli.data.vocabulary import RESERVED_TOKENS

    words = [token for token in tokenizer.vocabulary.tokens[len(RESERVED_TOKENS):]
             if not token.startswith(SUFFIX_INDICATOR) and any(map(str.isalnum, token))
             and (tokenizer.level != "subword" or len(token) > 1)]
    separator = "" if tokenizer.level == "char" else " "
    sentences, start = [], 0
    for length in SAMPLE_LENGTHS:
        sentences.append(separator.join(words[start : start + length]))
        start += length
    return [sentence for sentence in sentences if sentence] or ["."]


def best_texts(translator, texts, prefixes=None):
    """The best translation of each text as `attncli translate` prints it ("" for a
    blank line, which it does not translate), each beginning with its prefix."""
    return [result.hypotheses[0].text if result is not None else ""
            for result in translate_lines(translator, texts, prefixes=prefixes)]


def check_prefixes(translator, samples):
    """A prefix per sample for the check: the first word of its greedy translation, or ""
    where that is no prefix `attncli translate` would take."""
    from attncli.search.translation import PrefixError

    prefixes = []
    for sample, text in zip(samples, best_texts(translator, samples)):
        words = text.split()[:1]
        try:
            translator.check_prefixes([sample], words)
        except PrefixError:
            words = []
        prefixes.append(words[0] if words else "")
    return prefixes


def run_check(directory, samples, prefixes):
    """The `translation` of `samples` from every signature (with `prefixes`, and seed 0),
    by a fresh Python that imports TensorFlow and tensorflow-text only:
    {signature: [text, ...]}."""
    from attncli.search.serving import INPUTS

    request = {"texts": samples, "prefixes": prefixes, "seeds": [0] * len(samples),
               "signatures": INPUTS}
    environment = dict(os.environ)
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # the child's start-up chatter
    # The samples go by stdin: as an argument, long ones would pass the system's limit.
    completed = subprocess.run(
        [sys.executable, "-I", "-c", CHECK, str(Path(directory).resolve())],
        input=json.dumps(request), cwd=directory, capture_output=True, text=True,
        env=environment,
    )
    if completed.returncode != 0:
        lines = completed.stderr.strip().splitlines() or [f"exit code {completed.returncode}"]
        raise AttncliError(
            f"the export failed its check in a fresh Python ({clipped(lines[-1], 200)}); "
            "nothing was written"
        )
    return json.loads(completed.stdout)


def claim_destination(destination, console):
    """Refuse a DIR that holds anything, and remove what an interrupted export to it left
    (every format writes into a new or empty directory, never replacing anything)."""
    if not vacant(destination):
        raise AttncliError(
            f"{destination} exists and is not an empty directory; give a new directory "
            "(an export never replaces anything)"
        )
    for path in clear_abandoned(destination):
        console.print(f"removed {path}, what an interrupted export to {destination} left",
                      highlight=False, markup=False, soft_wrap=True)


class ExportFormat(NamedTuple):
    """One format of `attncli export --format`.

    Attributes:
        description: what DIR holds, for `--help` and errors.
        options: the command-line options the format takes beyond those every format does
            (`--ensemble`, `--sampling`, `--temperature`), as `export` names them.
        export: the function that writes and checks it, called with `export`'s arguments;
            returns the exit code.
    """

    description: str
    options: frozenset
    export: Callable


def export(*, format_name="savedmodel", **arguments):
    """Run `attncli export`: the format's `export` with `arguments`; returns the process
    exit code. An option the format does not take is one line."""
    chosen = FORMATS.get(format_name)
    if chosen is None:
        raise AttncliError(f"--format {shown(format_name)} is not a format; choose one of "
                           f"{', '.join(FORMATS)}")
    for name, flag in (("ensemble", "--ensemble"), ("sampling", "--sampling"),
                       ("temperature", "--temperature")):
        if arguments.get(name) not in (None, (), []) and name not in chosen.options:
            raise AttncliError(f"{flag} is an option of other formats; --format "
                               f"{format_name} writes {chosen.description}: drop {flag}")
    return chosen.export(**{name: value for name, value in arguments.items()
                            if name in chosen.options or name not in OPTIONAL})


def export_saved_model(*, run_path, destination, beam, alpha, n_best, samples, console,
                       load_tensorflow, ensemble=(), sampling=None, temperature=None):
    """Write and check a SavedModel; returns the process exit code."""
    destination = Path(destination)
    try:
        drawing = Sampling.parse("random" if sampling is None else sampling,
                                 1.0 if temperature is None else temperature)
    except ValueError as error:
        raise AttncliError(f"--sampling: {error}") from None
    directory = model_directory(run_path)
    members = [directory, *(model_directory(path) for path in ensemble)]
    claim_destination(destination, console)
    load_tensorflow()

    from attncli.files import new_directory
    from attncli.search import serving
    from attncli.search.ensemble import load_ensemble

    loaded = load_ensemble(members)
    searches = {"greedy": search_config(loaded.search, 1, alpha, None),
                "beam": search_config(loaded.search, beam, alpha, n_best)}
    samples = list(samples) or sample_sentences(loaded.source_tokenizer, run_path)
    # The translators the export's signatures call: the texts they give here are those the
    # export must reproduce, and the export reuses their traces.
    translators = serving.signature_translators(
        loaded.model, loaded.source_tokenizer, loaded.target_tokenizer,
        greedy=searches["greedy"], beam=searches["beam"], sampling=drawing,
        source_end=loaded.source_end,
    )
    prefixes = check_prefixes(translators["greedy"], samples)
    expected = {name: best_texts(translators[name.removesuffix("_prefix")], samples,
                                 prefixes if "prefixes" in inputs else None)
                for name, inputs in serving.INPUTS.items()}
    try:
        with new_directory(destination) as staging:
            with console.status(f"exporting {directory} to {destination}"):
                serving.write_saved_model(staging, translators)
            with console.status("loading the export in a fresh Python"):
                served = run_check(staging, samples, prefixes)
            if served != expected:
                raise AttncliError(
                    f"the export translated {shown(samples)} as {shown(served)} where "
                    f"attncli translate gives {shown(expected)}; nothing was written"
                )
            ops = serving.custom_ops(staging)
    except FileExistsError:
        raise AttncliError(
            f"{destination} was created or filled while exporting; nothing was replaced, "
            "give a new directory"
        ) from None
    report(console, destination, searches, drawing, ops, samples, prefixes, served)
    return 0


def report(console, destination, searches, drawing, ops, samples, prefixes, served):
    """What was written and what the check found, on stderr."""

    def say(text):
        console.print(text, highlight=False, markup=False, soft_wrap=True)

    beam = searches["beam"]
    say(f"exported to {destination}: a TensorFlow SavedModel")
    say(f"  signatures: greedy (also serving_default); beam with beam_size={beam.beam_size}, "
        f"n_best={beam.n_best or beam.beam_size}, alpha={beam.alpha}, at most "
        f"{beam.max_length_ratio} x source + {beam.max_length_offset} tokens; "
        f"greedy_prefix and beam_prefix; sample ({drawing}, temperature "
        f"{drawing.temperature:g})")
    say("  inputs: texts string (batch,); prefixes string (batch,) (the _prefix signatures "
        "and sample); seeds int64 (batch,) (sample)")
    say("  outputs: translation string (batch,), score float32 (batch,), translations "
        "string (batch, n), scores float32 (batch, n)")
    say("  tensorflow-text ops: " + (", ".join(ops) if ops else "none")
        + " (run `import tensorflow_text` before loading it)")
    say("checked in a fresh Python (TensorFlow and tensorflow-text only, attncli not "
        "imported): every signature translates as attncli translate does")
    for index, sample in enumerate(samples):
        say(f"  {shown(sample)} -> greedy {shown(served['greedy'][index])}, "
            f"beam {shown(served['beam'][index])}")
        say(f"    prefix {shown(prefixes[index])} -> greedy "
            f"{shown(served['greedy_prefix'][index])}, beam "
            f"{shown(served['beam_prefix'][index])}, sample (seed 0) "
            f"{shown(served['sample'][index])}")


def export_ctranslate2(*, run_path, destination, beam, alpha, n_best, samples, console,
                       load_tensorflow):
    """Write and check a CTranslate2 model directory; returns the process exit code."""
    from attncli.export.convertible import ctranslate2_refusal
    from attncli.model.saving import read_model_config

    destination = Path(destination)
    directory = model_directory(run_path)
    refused = ctranslate2_refusal(read_model_config(directory)["model"])
    if refused is not None:
        raise AttncliError(f"cannot export {run_path} as ctranslate2: {refused}")
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        raise AttncliError("--format ctranslate2 needs the ctranslate2 package: pip install "
                           "'attncli[ctranslate2]'") from None
    from attncli.export import ctranslate2_export as ctranslate2_files
    claim_destination(destination, console)
    load_tensorflow()

    from attncli.cli.runs import run_name
    from attncli.files import new_directory
    from attncli.search.loading import load_model

    loaded = load_model(directory)
    searches = {"greedy": search_config(loaded.search, 1, alpha, None),
                "beam": search_config(loaded.search, beam, alpha, n_best)}
    # A blank line is not translated by `attncli translate`: there is nothing to compare.
    samples = [sample for sample in samples if sample.strip()] or (
        validation_sentences(run_path, CTRANSLATE2_SAMPLES)
        or vocabulary_sentences(loaded.source_tokenizer))
    wanted = {name: ctranslate2_files.expected(
                  loaded.translator(search, attention_weights=False), samples)
              for name, search in searches.items()}
    name = run_name(run_path, directory)
    try:
        with new_directory(destination) as staging:
            with console.status(f"converting {directory} for CTranslate2"):
                ctranslate2_files.write(staging, directory, loaded, searches["beam"], name,
                                        (samples[0], wanted["greedy"][0][0]), str(destination))
            with console.status("translating with it in a fresh Python"):
                found = ctranslate2_files.run_check(staging, samples, searches)
            for search_name in searches:
                different = ctranslate2_files.difference(samples, search_name, found[search_name],
                                                         wanted[search_name])
                if different is not None:
                    raise AttncliError(f"the export failed its check: {different}; nothing "
                                       "was written")
    except FileExistsError:
        raise AttncliError(
            f"{destination} was created or filled while exporting; nothing was replaced, "
            "give a new directory"
        ) from None
    beam_search = searches["beam"]

    def say(text):
        console.print(text, highlight=False, markup=False, soft_wrap=True)

    say(f"exported to {destination}: a CTranslate2 model (float32; int8 when loaded with "
        "--compute-type int8), the run's tokenizer files and README.md")
    say(f"  decoding: beam_size={beam_search.beam_size}, n_best={beam_search.returned}, "
        f"alpha={beam_search.alpha}, at most {beam_search.max_length_ratio} x source + "
        f"{beam_search.max_length_offset} tokens; sources of at most "
        f"{ctranslate2_files.SOURCE_POSITIONS} tokens")
    say(f"checked in a fresh Python without TensorFlow: greedy and beam translations of "
        f"{len(samples)} sentence(s) are attncli translate's (tokens identical, scores "
        f"within {ctranslate2_files.SCORE_TOLERANCE:g})")
    say(f"  translate: attncli translate {destination} TEXT --engine ctranslate2")
    return 0


# The options only some formats take (`ExportFormat.options`).
OPTIONAL = frozenset({"ensemble", "sampling", "temperature"})

FORMATS = {
    "savedmodel": ExportFormat(
        "a TensorFlow SavedModel (strings in, translations out; TensorFlow Serving)",
        frozenset({"ensemble", "sampling", "temperature"}), export_saved_model,
    ),
    "ctranslate2": ExportFormat(
        "a CTranslate2 model directory with the run's tokenizer files (Transformer models)",
        frozenset(), export_ctranslate2,
    ),
}
