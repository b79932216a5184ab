"""What `attncli export` checks an export on, and the fresh Python that checks a SavedModel.

The check: a fresh Python (`python -I`: neither the current directory nor PYTHONPATH
on its path) imports TensorFlow and tensorflow-text only, loads the export, asserts
that attncli was not imported, and translates the sample sentences with both
signatures (those with prefixes given the first word of each greedy translation as its
prefix, `sample` seed 0); the translations must equal what `attncli translate`
prints for them here.
The sample sentences are `--sample`'s, else the first two of the run's validation split
(real text, so a subword tokenizer is checked on `##` pieces), else the most frequent
words of the source vocabulary. What it found goes to stderr; stdout stays empty.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from attncli.cli.runs import translate_lines
from attncli.config.run import load_run_config
from attncli.data.sources import read_splits
from attncli.data.text_rules import SUFFIX_INDICATOR
from attncli.errors import AttncliError, clipped

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
    from attncli.data.vocabulary import RESERVED_TOKENS  # imports TensorFlow

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
    from attncli.search.translation import PrefixError  # imports TensorFlow

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
    from attncli.search.serving import INPUTS  # imports TensorFlow

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
