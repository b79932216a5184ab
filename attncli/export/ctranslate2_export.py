"""What `attncli export RUN DIR --format ctranslate2` writes, and how it checks it.

DIR holds:

    model.bin, config.json, source_vocabulary.json,   the CTranslate2 model, as
    target_vocabulary.json (or shared_vocabulary)      `TransformerConverter` converts it
    source.tokenizer.json, source.vocab.txt, ...      the run's tokenizer files (and
                                                       SentencePiece models), as in its model
    attncli-ctranslate2.json                          decoding settings, source_end, limits
    README.md                                         how to call it

The check runs in a fresh Python (`python -I`) that imports the export's engine only
(`attncli.export.ctranslate2_engine`, no TensorFlow: the check asserts it), and translates
the sample sentences greedily and with the export's beam; the source tokens and the best
translation's tokens and text must equal what `attncli translate` gives for them here, and
its score agree within `SCORE_TOLERANCE`.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from attncli.errors import AttncliError, clipped, shown
from attncli.export.ctranslate2_engine import FORMAT, SETTINGS_FILE, VERSION
from attncli.files import write_text_atomically

SOURCE_POSITIONS = 1024  # the longest source (in tokens) an export reads
SCORE_TOLERANCE = 1e-4

# Run by `python -I -c` in the check: the engine, and no TensorFlow.
CHECK = """
import json, sys
from attncli.config.search import SearchConfig
from attncli.export.ctranslate2_engine import ExportedTranslator
request = json.loads(sys.stdin.read())
results = {}
for name, settings in request["searches"].items():
    engine = ExportedTranslator(sys.argv[1], search=SearchConfig(**settings))
    found = engine.translate(request["texts"])
    results[name] = [[translation.source_tokens, [[h.tokens, h.text, h.score]
                      for h in translation.hypotheses]] for translation in found]
assert "tensorflow" not in sys.modules, "the engine imported TensorFlow"
print(json.dumps(results))
"""

README = """\
# {name}: a CTranslate2 model exported by attncli

A Transformer trained by attncli (run {run}), converted for CTranslate2
(https://opennmt.net/CTranslate2/) by `attncli export RUN DIR --format ctranslate2`, with
the run's tokenizer files.

Decoding settings, as exported: beam {beam}, alpha {alpha}, n-best {n_best}, at most
{ratio} x source + {offset} tokens. Sources of at most {source_positions} tokens{source_end}.

## From the command line

    pip install 'attncli[ctranslate2]'
    attncli translate {directory} "{example}" --engine ctranslate2
    attncli translate {directory} --input FILE --engine ctranslate2 --compute-type int8

This loads no TensorFlow. `--beam`, `--alpha` and `--n-best` change the settings above,
`--format tsv|json` gives scores (and the attention weights), as `attncli translate` does.

## From Python

The model reads attncli's tokens: tokenise with attncli's tokenizer files (the engine below
does it without TensorFlow), then search as attncli does:

    from attncli.export.ctranslate2_engine import ExportedTranslator

    engine = ExportedTranslator("{directory}")  # compute_type="int8", search=SearchConfig(...)
    [translation] = engine.translate(["{example}"])
    print(translation.hypotheses[0].text)

or with CTranslate2 alone, on tokens you made:

    import ctranslate2

    translator = ctranslate2.Translator("{directory}")
    [result] = translator.translate_batch(
        [source_tokens],                 # e.g. {tokens}{end_hint}
        beam_size={beam}, num_hypotheses={beam}, length_penalty=0,
        min_decoding_length=0, max_decoding_length=MAX,  # ceil({ratio} x len) + {offset}
        max_input_length=0, return_end_token=True, return_scores=True)

`result.scores` are then `log P`; attncli ranks the hypotheses by
`log P / ((5 + len(tokens)) / 6) ** {alpha}` (`tokens` with its `[END]`), the tokens
without `[END]` detokenised by the target tokenizer. The model never emits `[PAD]` or
`[START]` (their output bias is -1e9).
"""


def write(staging, model_dir, loaded, search, run_name, example, destination):
    """Convert `loaded` (a `LoadedModel` of `model_dir`) into `staging` with the
    tokenizer files, the settings (decoding by `search`, a `SearchConfig`) and the README
    (`example` and `destination`: as `readme` takes them)."""
    from attncli.export.ctranslate2_engine import longest_target
    from attncli.export.ctranslate2_model import TransformerConverter
    from attncli.model.saving import CONFIG_FILE, WEIGHTS_FILE, model_files

    converter = TransformerConverter(
        loaded.model, loaded.source_tokenizer.vocabulary.tokens,
        loaded.target_tokenizer.vocabulary.tokens, SOURCE_POSITIONS,
        longest_target(SOURCE_POSITIONS, search.max_length_ratio, search.max_length_offset),
    )
    # CTranslate2 writes into a directory it creates: staging's own, then moved up.
    converted = Path(staging) / "converted"
    converter.convert(str(converted))
    for path in converted.iterdir():
        path.rename(Path(staging) / path.name)
    converted.rmdir()
    for name in model_files(model_dir):
        if name not in (CONFIG_FILE, WEIGHTS_FILE):
            shutil.copyfile(Path(model_dir) / name, Path(staging) / name)
    settings = {
        "format": FORMAT, "version": VERSION, "run": run_name,
        "source_end": loaded.source_end, "decoding": dataclasses.asdict(search),
        "source_positions": SOURCE_POSITIONS,
    }
    write_text_atomically(Path(staging) / SETTINGS_FILE, json.dumps(settings, indent=2) + "\n")
    write_text_atomically(Path(staging) / "README.md",
                          readme(loaded, search, run_name, example, destination))


def readme(loaded, search, run_name, example, destination):
    """The README.md of an export to `destination` (the path the user gave); `example`
    is `(text, tokens)`, a sentence and the tokens the model reads for it."""
    text, tokens = example
    return README.format(
        name=run_name, run=run_name, beam=search.beam_size, alpha=search.alpha,
        n_best=search.returned, ratio=search.max_length_ratio, offset=search.max_length_offset,
        source_positions=SOURCE_POSITIONS,
        source_end="; `[END]` ends each source" if loaded.source_end else "",
        directory=destination, example=text.replace('"', '\\"'),
        tokens=json.dumps(tokens, ensure_ascii=False),
        end_hint="" if not loaded.source_end else " (its [END] included)",
    )


def expected(translator, samples):
    """What `attncli translate` gives for `samples` with `translator`, in the check's
    form: per sample, `[source_tokens, [[tokens, text, score], ...]]`."""
    return [[list(result.source_tokens),
             [[list(h.tokens), h.text, h.score] for h in result.hypotheses]]
            for result in translator.translate(samples)]


def run_check(directory, samples, searches):
    """The check's translations of `samples`, by a fresh Python that imports the engine
    and not TensorFlow: {search name: [[source_tokens, [[tokens, text, score], ...]], ...]}."""
    request = {"texts": samples,
               "searches": {name: dataclasses.asdict(search) for name, search in searches.items()}}
    completed = subprocess.run(
        [sys.executable, "-I", "-c", CHECK, str(Path(directory).resolve())],
        input=json.dumps(request), capture_output=True, text=True, env=dict(os.environ),
    )
    if completed.returncode != 0:
        lines = completed.stderr.strip().splitlines() or [f"exit code {completed.returncode}"]
        raise AttncliError(f"the export failed its check in a fresh Python "
                           f"({clipped(lines[-1], 200)}); nothing was written")
    return json.loads(completed.stdout)


def difference(samples, name, found, wanted):
    """The first way CTranslate2's `found` differs from attncli's `wanted` for the search
    `name`, in words, or None: the source tokens, and the best translation's tokens, text
    and score (the n-best below it are the searches' own: their beams differ)."""
    for sample, (source, hypotheses), (want_source, want_hypotheses) in zip(
            samples, found, wanted):
        if source != want_source:
            return (f"the export's tokenizer reads {shown(sample)} as {shown(' '.join(source))} "
                    f"where attncli reads {shown(' '.join(want_source))}")
        (tokens, text, score), (want_tokens, want_text, want_score) = (
            hypotheses[0] if hypotheses else [[], "", 0.0], want_hypotheses[0])
        if tokens != want_tokens or text != want_text:
            return (f"CTranslate2's {name} search translates {shown(sample)} as "
                    f"{shown(' '.join(tokens))} where attncli translate gives "
                    f"{shown(' '.join(want_tokens))}")
        if abs(score - want_score) > SCORE_TOLERANCE:
            return (f"CTranslate2's {name} score of {shown(sample)} is {score:.6f} where "
                    f"attncli's is {want_score:.6f}")
    return None
