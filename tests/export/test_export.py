"""`attncli export RUN DIR`: a SavedModel that a Python without attncli loads with
`import tensorflow_text` alone and that translates exactly as `attncli translate` prints,
for every kind of model and tokenizer; and the one-line errors that write nothing."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf
from typer.testing import CliRunner

from cli_errors import one_line_error
from process_watch import communicate
from spa_eng_parts import REPO, SENTENCES, spa_eng_pairs

from attncli.cli import export_check, export_command
from attncli.cli.app import app
from attncli.config.model import ModelConfig
from attncli.data.tokenization import TUTORIAL_NORMALIZATION, Tokenizer
from attncli.data.vocabulary import END
from attncli.model.encoder_decoder import Seq2Seq
from attncli.model.saving import save_model
from attncli.search import serving
from attncli.search.serving import blank

FIXTURE_RUN = REPO / "tests" / "fixtures" / "run-0.1.0"
# Blank lines are printed empty by translate, untranslated: "\u3000" is a space to Python.
LINES = SENTENCES + ["", "Tom.", "   ", "\u3000", "Me gusta mucho leer libros en la biblioteca."]
DECODING = {"beam_size": 3, "n_best": 1, "max_length_ratio": 1.0, "max_length_offset": 4}
# kind: (ModelConfig fields, tokenizer level, `attncli export` options, also `translate`'s)
KINDS = {
    "self-attention": (dict(encoder="self-attention", decoder="self-attention", heads=2,
                            encoder_layers=2, decoder_layers=2, tie_embeddings="target"),
                       "char", {}),
    "hybrid": (dict(encoder="self-attention", decoder="luong", score="general",
                    input_feeding=True, heads=2), "subword",
               {"--beam": "2", "--n-best": "2", "--alpha": "0.2"}),
}
TRAINED = "rnn-luong (trained run)"
# The self-attention model exported with `--ensemble` and a second model of its
# tokenizers (`ENSEMBLE_MEMBER`), translated with the same option. The member is the
# recurrent model with Bahdanau's decoder, additive score and LSTM cells: exported
# inside the ensemble rather than alone, one export fewer (an export of an RNN alone is
# the trained run's; Luong's input feeding is the hybrid's, n-best 2 the hybrid's too).
ENSEMBLE = "ensemble (self-attention + rnn-bahdanau)"
ENSEMBLE_MEMBER = (dict(decoder="bahdanau", score="additive", cell="lstm"), "char")
KIND_NAMES = [TRAINED, *KINDS, ENSEMBLE]

# One Python without attncli for the module: `python -I`, no PYTHONPATH, another
# directory, and an import hook that refuses `attncli` and `layers` even where they are
# installed. It runs each program it is sent (the code of a `python -I -c CODE ARGS`
# command, with its arguments and stdin) and answers with its exit code, stdout and
# stderr: the check of every export the fixture makes (export_check.CHECK, as
# `attncli export` sends it), then SERVE. One Python instead of five: each would spend
# seconds importing TensorFlow and tensorflow-text (the check's own subprocess runs in
# test_reliability_damage, where `attncli export` is a process of its own). A program
# sent with a name to `keep` has the `exported` it loaded kept under that name, and
# SERVE translates with what was kept instead of loading the export a second time: the
# export the check loaded, in the directory `attncli export` then renamed into place.
# The trained run's export is not kept: SERVE loads it from where it was put.
WITHOUT_ATTNCLI = """
import contextlib, io, json, sys, traceback


class WithoutAttncli:
    \"\"\"Refuses attncli and its layers package, whether installed or not.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("attncli", "layers"):
            raise ImportError(f"{name} imported while loading an export")
        return None


sys.meta_path.insert(0, WithoutAttncli())
requests, replies = sys.stdin, sys.stdout
kept = {}
for line in requests:
    request = json.loads(line)
    sys.argv = ["-c", *request["argv"]]
    sys.stdin = io.StringIO(request["stdin"])
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    namespace = {"__name__": "__main__", "KEPT": kept}
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            exec(request["code"], namespace)
            if request["keep"]:
                kept[request["keep"]] = namespace["exported"]
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
    replies.write(json.dumps({"returncode": code, "stdout": stdout.getvalue(),
                              "stderr": stderr.getvalue()}) + "\\n")
    replies.flush()
"""

SERVE = """
import json, sys

import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the tokenizers' ops

def plain(value):
    array = value.numpy()
    if value.dtype != tf.string:
        return array.tolist()
    if array.ndim == 1:
        return [text.decode("utf-8") for text in array]
    return [[text.decode("utf-8") for text in row] for row in array]

exports, lines = json.loads(sys.argv[1]), json.loads(sys.argv[2])
results = {}
for kind, directory in exports.items():
    exported = KEPT[kind] if kind in KEPT else tf.saved_model.load(directory)
    results[kind] = {}
    for name in ("greedy", "beam", "serving_default"):
        outputs = exported.signatures[name](texts=tf.constant(lines))
        results[kind][name] = {
            key: {"dtype": value.dtype.name, "shape": value.shape.as_list(), "value": plain(value)}
            for key, value in outputs.items()
        }
print(json.dumps({
    "results": results,
    "loaded": sorted(kind for kind in exports if kind not in KEPT),
    "attncli imported": "attncli" in sys.modules,
}))
"""


def tokenizers(level):
    """Source and target tokenizers at `level`, learned from 3,000 Tatoeba pairs."""
    pairs = spa_eng_pairs(3000)
    return [
        Tokenizer(level, **TUTORIAL_NORMALIZATION).with_vocabulary(
            Tokenizer(level, **TUTORIAL_NORMALIZATION).build_vocabulary(
                [pair[side] for pair in pairs], max_size=300
            )
        )
        for side in (0, 1)
    ]


def seeded_model_directory(directory, fields, level):
    """A seeded, untrained model saved with the `DECODING` settings; the output layer
    favours end-of-sentence a little, so hypotheses end at many lengths."""
    source, target = tokenizers(level)
    tf.keras.utils.set_random_seed(3)
    config = ModelConfig(source_vocab_size=len(source.vocabulary),
                         target_vocab_size=len(target.vocabulary),
                         embedding_dim=16, units=16, **fields)
    model = Seq2Seq(config)
    bias = model.decoder.output_layer.bias
    bias.assign(bias.numpy() + 1.5 * (np.arange(bias.shape[0]) == END))
    save_model(directory, model, source, target, metadata={"decoding": DECODING})
    return directory


def kind_options(kind, models):
    """The `attncli export` options of `kind`, also given to `attncli translate`."""
    if kind == ENSEMBLE:  # the member lies beside the first model
        return {"--ensemble": str(models[ENSEMBLE].parent / "ensemble-member")}
    return KINDS[kind][2] if kind in KINDS else {}


def translate(model, *options, lines=LINES, tmp_path):
    """`attncli translate MODEL --input FILE OPTIONS`: its stdout lines."""
    source = tmp_path / "lines.txt"
    source.write_text("\n".join(lines) + "\n", "utf-8")
    result = CliRunner().invoke(app, ["translate", str(model), "--input", str(source), *options])
    assert result.exit_code == 0, result.output
    return result.stdout.split("\n")[:-1]


class PythonWithoutAttncli:
    """`WITHOUT_ATTNCLI` running in `directory`; `run` stands for `subprocess.run` of a
    `python -I -c CODE ARGS` command and sends CODE there, with `keep` (a name, or None)."""

    keep = None

    def __init__(self, directory):
        environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        self.log_path = directory / "stderr.txt"  # TensorFlow's start-up chatter
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", WITHOUT_ATTNCLI], cwd=directory, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env={**environment, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )

    def run(self, command, *, input="", **_):
        python, isolated, code_flag, code, *argv = command
        assert (python, isolated, code_flag) == (sys.executable, "-I", "-c"), command
        try:
            self.process.stdin.write(json.dumps({"code": code, "argv": argv, "stdin": input,
                                                 "keep": self.keep}) + "\n")
            self.process.stdin.flush()
            reply = self.process.stdout.readline()
        except BrokenPipeError:
            reply = ""
        assert reply, "the Python without attncli ended:\n" + self.log_path.read_text()[-3000:]
        reply = json.loads(reply)
        return subprocess.CompletedProcess(command, reply["returncode"], reply["stdout"],
                                           reply["stderr"])

    def close(self):
        communicate(self.process)  # closes its stdin: it ends
        self.log.close()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Every kind exported by `attncli export`, and what a Python without attncli
    (`PythonWithoutAttncli`, which also ran each export's check) makes of each export:
    (models, reports, served)."""
    work = tmp_path_factory.mktemp("export")
    models = {TRAINED: work / "run"}
    shutil.copytree(FIXTURE_RUN, models[TRAINED])
    for kind, (fields, level, _) in KINDS.items():
        models[kind] = seeded_model_directory(work / kind, fields, level)
    models[ENSEMBLE] = models["self-attention"]
    seeded_model_directory(work / "ensemble-member", *ENSEMBLE_MEMBER)
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    python = PythonWithoutAttncli(elsewhere)
    exports, reports = {}, {}
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(export_check, "subprocess", SimpleNamespace(run=python.run))
            for kind, model in models.items():
                exports[kind] = work / "exports" / kind.split()[0]
                python.keep = None if kind == TRAINED else kind
                if kind == "self-attention":
                    exports[kind].mkdir(parents=True)  # an empty directory is taken
                # In this process: `attncli export` runs as a subprocess in
                # test_reliability_damage.
                options = [part for option in kind_options(kind, models).items()
                           for part in option]
                result = CliRunner().invoke(app, ["export", str(model), str(exports[kind]),
                                                  *options])
                assert result.exit_code == 0, result.output
                reports[kind] = result
        python.keep = None
        completed = python.run(
            [sys.executable, "-I", "-c", SERVE,
             json.dumps({kind: str(path) for kind, path in exports.items()}), json.dumps(LINES)],
        )
    finally:
        python.close()
    assert completed.returncode == 0, completed.stderr[-3000:]
    served = json.loads(completed.stdout)
    assert served["attncli imported"] is False
    assert served["loaded"] == [TRAINED]  # the others were kept from their checks
    return models, reports, served["results"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KIND_NAMES)
def test_the_export_translates_as_attncli_translate_prints(exported, kind, tmp_path):
    models, _, served = exported
    options = kind_options(kind, models)
    kept = [part for name in ("--alpha", "--ensemble") if name in options
            for part in (name, options[name])]
    greedy = translate(models[kind], "--beam", "1", *kept, tmp_path=tmp_path)
    beam = translate(models[kind], *[part for option in options.items() for part in option],
                     tmp_path=tmp_path)
    assert served[kind]["greedy"]["translation"]["value"] == greedy
    assert served[kind]["serving_default"] == served[kind]["greedy"]
    n_best = int(options.get("--n-best", 1))
    translations = served[kind]["beam"]["translations"]["value"]
    assert [" ||| ".join(row) if line.strip() else "" for row, line in zip(translations, LINES)
            ] == beam
    assert served[kind]["beam"]["translation"]["value"] == [row[0] for row in translations]
    for name, n in (("greedy", 1), ("beam", n_best)):
        outputs = served[kind][name]
        assert {key: (value["dtype"], value["shape"]) for key, value in outputs.items()} == {
            "translation": ("string", [len(LINES)]), "score": ("float32", [len(LINES)]),
            "translations": ("string", [len(LINES), n]), "scores": ("float32", [len(LINES), n]),
        }
        for line, text, score in zip(LINES, outputs["translation"]["value"],
                                     outputs["score"]["value"]):
            if not line.strip():
                assert (text, score) == ("", 0.0)
            else:
                assert score < 0


@pytest.mark.slow
def test_the_ensemble_is_not_its_first_model_alone(exported):
    _, _, served = exported
    assert served[ENSEMBLE]["beam"]["scores"] != served["self-attention"]["beam"]["scores"]


@pytest.mark.slow
def test_greedy_and_beam_differ_somewhere_so_each_comparison_can_fail(exported):
    _, _, served = exported
    assert any(served[kind]["greedy"]["translation"] != served[kind]["beam"]["translation"]
               for kind in KIND_NAMES)


@pytest.mark.slow
def test_the_report_names_the_signatures_ops_and_the_check(exported):
    _, reports, _ = exported
    trained = reports[TRAINED]
    assert trained.stdout == ""
    assert "beam_size=2, n_best=1, alpha=0.6" in trained.stderr  # the run's decoding
    assert ("tensorflow-text ops: CaseFoldUTF8, NormalizeUTF8, RegexSplitWithOffsets"
            in trained.stderr)
    assert "attncli not imported" in trained.stderr
    assert "beam_size=2, n_best=2, alpha=0.2" in reports["hybrid"].stderr
    assert "FastWordpieceTokenizeWithOffsets" in reports["hybrid"].stderr


def assert_one_line_error(result, fragment):
    error = one_line_error(result)
    assert result.stderr.strip() == error
    assert result.stdout == ""
    assert fragment in error


def test_a_missing_run_is_a_one_line_error_and_writes_nothing(tmp_path):
    result = CliRunner().invoke(app, ["export", str(tmp_path / "nowhere"), str(tmp_path / "out")])
    assert_one_line_error(result, "no such run directory")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("occupied", ["directory", "file"])
def test_a_destination_that_is_not_empty_is_left_alone(tmp_path, occupied):
    destination = tmp_path / "exported"
    if occupied == "directory":
        destination.mkdir()
        (destination / "notes.txt").write_text("mine")
    else:
        destination.write_text("mine")
    result = CliRunner().invoke(app, ["export", str(FIXTURE_RUN), str(destination)])
    assert_one_line_error(result, f"{destination} exists and is not an empty directory")
    assert [path.name for path in tmp_path.iterdir()] == ["exported"]
    kept = destination / "notes.txt" if occupied == "directory" else destination
    assert kept.read_text() == "mine"


@pytest.mark.slow
def test_an_export_that_fails_its_check_is_not_written(tmp_path, monkeypatch):
    # What is written does not matter once the check fails: a file stands for the
    # SavedModel (whose tracing and saving the fixture's exports go through).
    monkeypatch.setattr(serving, "write_saved_model",
                        lambda directory, translators:
                        (Path(directory) / "saved_model.pb").write_bytes(b"stand-in"))
    monkeypatch.setattr(export_command, "run_check",
                        lambda directory, samples, *more: {"greedy": ["?"], "beam": ["?"]})
    destination = tmp_path / "exported"
    result = CliRunner().invoke(
        app, ["export", str(FIXTURE_RUN), str(destination), "--sample", "Hola."]
    )
    assert_one_line_error(result, "where attncli translate gives")
    assert list(tmp_path.iterdir()) == []


def test_blank_is_what_python_strips_away():
    characters = [chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]
    expected = [character.strip() == "" for character in characters]
    texts = [character * 2 for character in characters] + ["", " a ", "\u200b"]
    found = blank(tf.constant(texts)).numpy().tolist()
    assert found == expected + [True, False, False]
