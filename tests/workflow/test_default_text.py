"""The default run writes text as people write it, and `--reference` says how it scored.

The run here is `attncli train` with no config (the bundled `default.yaml`: cased
WordPiece, accents kept) on a corpus of three sentence pairs repeated, which a small
model learns by heart in a few dozen steps; so `attncli translate`, greedy as validation
decodes, must give back the exact targets, capitals, accents, `¿`, apostrophes and all,
also where a word is written in WordPiece pieces. A target side that is lower-cased with
its accents stripped has its references written the same way before they are scored: a
seeded, untrained model of such a side, saved as training saves one, checks that.
Scores are checked against sacreBLEU called here on references normalised here
(Python's `unicodedata`).
"""

import json
import re
import unicodedata

import numpy as np
import pytest
import sacrebleu
import tensorflow as tf
from attncli_process import attncli
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.config.model import ModelConfig
from attncli.data.tokenization import Tokenizer
from attncli.data.vocabulary import RESERVED_TOKENS
from attncli.model.encoder_decoder import Seq2Seq
from attncli.model.saving import save_model

pytestmark = pytest.mark.slow

PAIRS = [
    ("What is Zoë's café called?", "¿Cómo se llama el café de Zoë?"),
    ("Kowalski lives in Zaragoza.", "Kowalski vive en Zaragoza."),
    ("Don't worry.", "Don't worry, it's Zoë's."),
]
SOURCES = [source for source, _ in PAIRS]
TARGETS = [target for _, target in PAIRS]
# The default config with the corpus above and a model small enough to learn it quickly.
# The kept model is the first to score BLEU 100 on the three pairs (the cased run's ninth
# epoch when this was written); the run then stops after three evaluations that cannot
# beat it, rather than at epoch 20. A plateau of three evaluations before 100 would stop
# it early, and the tests below would fail.
MEMORISE = [
    "data.format=tsv", "data.train=train.tsv", "data.valid=valid.tsv", "model.units=64",
    "model.embedding_dim=64", "training.learning_rate=0.01", "training.label_smoothing=0",
    "training.epochs=20", "training.patience=3", "training.max_minutes=null",
]


def train_default(work, *changes):
    """`attncli train --run-dir run` with the default config on PAIRS; the run's path."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "train.tsv").write_text(
        "".join(f"{source}\t{target}\n" for source, target in PAIRS * 30), encoding="utf-8"
    )
    (work / "valid.tsv").write_text(
        "".join(f"{source}\t{target}\n" for source, target in PAIRS), encoding="utf-8"
    )
    overrides = [argument for change in MEMORISE + list(changes) for argument in ("--set", change)]
    attncli("train", "--run-dir", "run", *overrides, cwd=work)
    return work / "run"


@pytest.fixture(scope="module")
def cased_run(tmp_path_factory):
    """60 target pieces: too few for whole words, so `café` is written `c ##a ##f ##é`."""
    return train_default(tmp_path_factory.mktemp("cased"), "data.target.vocab_size=60")


@pytest.fixture
def normalising_model(tmp_path):
    """A seeded, untrained model whose target side is lower-cased with its accents
    stripped, saved with `save_model` as training saves one: only how references are
    scored is tested with it, so it need not have learned anything.

    Word-level tokenizers learned from PAIRS, so every output is words of the
    vocabulary that the references' normalisation splits back into the same tokens.
    The reserved tokens are made unlikely: `[UNK]` would be taken apart there (`[`,
    `unk`, `]`), and an output that ends at once has no 4-gram to score; every output
    runs to the maximum length."""
    source = Tokenizer("word")
    source = source.with_vocabulary(source.build_vocabulary(SOURCES))
    target = Tokenizer("word", lowercase=True, strip_accents=True)
    target = target.with_vocabulary(target.build_vocabulary(TARGETS))
    tf.keras.utils.set_random_seed(1)
    model = Seq2Seq(ModelConfig(source_vocab_size=len(source.vocabulary),
                                target_vocab_size=len(target.vocabulary),
                                embedding_dim=16, units=16))
    bias = model.decoder.output_layer.bias
    bias.assign(bias.numpy() - 100.0 * (np.arange(bias.shape[0]) < len(RESERVED_TOKENS)))
    save_model(tmp_path / "model", model, source, target)
    return tmp_path / "model"


def translate(run, *args):
    """`attncli translate RUN ARGS` in this process (the run is trained by an `attncli`
    subprocess; a translation needs no process of its own)."""
    result = CliRunner().invoke(app, ["translate", str(run), *map(str, args)])
    assert result.exit_code == 0, result.output
    return result


def tutorial_form(text):
    """Lower case and accents stripped, as `lowercase` and `strip_accents` promise."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


def test_default_run_writes_cased_text_with_accents(cased_run):
    result = translate(cased_run, *SOURCES, "--beam", "1")  # greedy, as validation decodes
    assert result.stdout.splitlines() == TARGETS
    records = [json.loads(line) for line in (cased_run / "metrics.jsonl").read_text().splitlines()]
    kept = [record for record in records if record["best"]][-1]
    assert kept["references"] == "raw" and kept["bleu"] == pytest.approx(100.0)


def vocabulary(run, side):
    return set((run / f"{side}.vocab.txt").read_text("utf-8").splitlines())


@pytest.mark.parametrize("side, texts", [("source", SOURCES), ("target", TARGETS)])
def test_every_character_seen_in_training_has_a_piece(cased_run, side, texts):
    """A character seen starting a word is a piece `c`; one seen inside a word, `##c`."""
    tokens = vocabulary(cased_run, side)
    words = [word for text in texts for word in re.findall(r"\w+|[^\w\s]", text)]
    needed = {word[0] for word in words} | {"##" + c for word in words for c in word[1:]}
    assert needed - tokens == set()


def test_only_characters_never_seen_become_unknown(cased_run):
    seen = "Zaragoza's Kowalski doesn't call Zoë's café?"  # new words, seen characters
    unseen = "Zoë Ωmega."
    result = translate(cased_run, seen, unseen, "--format", "json", "--beam", "1")
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert "[UNK]" not in records[0]["source_tokens"]
    assert records[1]["source_tokens"].count("[UNK]") == 1  # the word with Ω
    assert "[UNK]" not in records[1]["source_tokens"][0]


def scored_line(stderr):
    [line] = [line for line in stderr.splitlines() if line.startswith("BLEU")]
    return line


def test_reference_of_a_cased_run_is_scored_raw(cased_run, tmp_path):
    references = ["¿Cómo se llama el café de Zoë?", "kowalski vive en zaragoza.", "Don't worry."]
    reference = tmp_path / "reference.txt"
    reference.write_text("\n".join(references) + "\n", encoding="utf-8")
    result = translate(cased_run, *SOURCES, "--reference", reference)
    expected = sacrebleu.corpus_bleu(result.stdout.splitlines(), [references]).score
    line = scored_line(result.stderr)
    assert line.startswith(f"BLEU {expected:.2f} ")
    assert "(raw references, cased;" in line


def written_up(text):
    """`text` in capitals with an acute accent on every vowel: `tutorial_form` takes it
    back to `text` when `text` is lower case without accents."""
    return unicodedata.normalize(
        "NFC", "".join(c.upper() + ("\u0301" if c in "aeiou" else "") for c in text)
    )


def test_reference_is_normalised_like_the_target_side(normalising_model, tmp_path):
    outputs = translate(normalising_model, *SOURCES, "--beam", "1").stdout.splitlines()
    # References that are the outputs written up: scored as written they share little
    # more than punctuation with them; normalised like the target side, they are them.
    references = [written_up(output) for output in outputs]
    reference = tmp_path / "reference.txt"
    reference.write_text("\n".join(references) + "\n", encoding="utf-8")
    result = translate(normalising_model, *SOURCES, "--beam", "1", "--reference", reference)
    assert result.stdout.splitlines() == outputs
    assert outputs == [tutorial_form(text) for text in references]
    expected = sacrebleu.corpus_bleu(outputs, [[tutorial_form(r) for r in references]]).score
    raw = sacrebleu.corpus_bleu(outputs, [references]).score
    assert expected == pytest.approx(100.0)
    assert expected > raw + 20
    line = scored_line(result.stderr)
    assert line.startswith(f"BLEU {expected:.2f} ")
    assert ("(references normalised like the model's target side: lower case, accents "
            "stripped;") in line
