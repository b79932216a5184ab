"""`attncli translate`'s stdout and stderr, byte for byte, in every format, on a seeded model.

`tests/translate_outputs.json` holds what the command printed before its results were taken
out of the graph in batch form and streamed (commit 0c91dc0, a translation per sentence
sliced from ragged tensors, all input read first): every later version must print the same
bytes. Regenerate it only for an intended change of output (the `--reference` line was,
when references came to be normalised like the target side and the line to name the form):

    PYTHONPATH=. python tests/cli/test_translate_outputs.py
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:  # run as a script to regenerate the expected outputs
    sys.path.insert(0, str(TESTS))

from spa_eng_parts import SENTENCES, model_and_tokenizers  # noqa: E402

from attncli.cli.app import app  # noqa: E402
from attncli.data.vocabulary import END  # noqa: E402
from attncli.model.saving import save_model  # noqa: E402

EXPECTED = TESTS / "translate_outputs.json"
LINES = SENTENCES + ["", "Tom.", "   ", "Me gusta mucho leer libros en la biblioteca.", "¿Qué?"]
REFERENCES = ["Get out of here!", "Where is the bathroom?", "Tom didn't come.",
              "It's cold today.", "", "Tom.", "", "I really like reading books.", "What?"]
# name: (source_end, arguments after `translate MODEL --input FILE`)
CASES = {
    "text greedy": (False, ["--beam", "1"]),
    "text beam 3, 3 best": (False, ["--beam", "3", "--n-best", "3", "--batch-size", "2"]),
    "tsv beam 3, 3 best": (False, ["--beam", "3", "--n-best", "3", "--format", "tsv"]),
    "tsv greedy": (False, ["--beam", "1", "--format", "tsv", "--batch-size", "3"]),
    "json greedy": (False, ["--beam", "1", "--format", "json"]),
    "json beam 4, 2 best": (False, ["--beam", "4", "--n-best", "2", "--format", "json",
                                    "--alpha", "0.2", "--batch-size", "4"]),
    "json beam 2, source end": (True, ["--beam", "2", "--n-best", "2", "--format", "json"]),
    "text beam 2, reference": (False, ["--beam", "2", "--reference", "REFERENCE"]),
}


def cli_outputs(directory):
    """{case: {"stdout", "stderr", "exit_code"}} of every case, run in this process."""
    directory = Path(directory)
    model, source_tokenizer, target_tokenizer = model_and_tokenizers()
    # Untrained, the model would never end a sentence: a little more weight on
    # end-of-sentence makes hypotheses end at every length, and some not at all.
    bias = model.decoder.output_layer.bias
    bias.assign(bias.numpy() + 0.5 * (np.arange(bias.shape[0]) == END))
    models = {}
    for source_end in (False, True):
        models[source_end] = directory / f"model-{source_end}"
        save_model(models[source_end], model, source_tokenizer, target_tokenizer,
                   source_end=source_end,
                   metadata={"decoding": {"max_length_ratio": 1.0, "max_length_offset": 4}})
    source = directory / "input.txt"
    source.write_text("\n".join(LINES) + "\n", "utf-8")
    reference = directory / "reference.txt"
    reference.write_text("\n".join(REFERENCES) + "\n", "utf-8")
    outputs = {}
    for name, (source_end, extra) in CASES.items():
        extra = [str(reference) if arg == "REFERENCE" else arg for arg in extra]
        result = CliRunner().invoke(
            app, ["translate", str(models[source_end]), "--input", str(source), *extra]
        )
        outputs[name] = {"stdout": result.stdout, "stderr": result.stderr,
                         "exit_code": result.exit_code}
    return outputs


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return cli_outputs(tmp_path_factory.mktemp("translate-outputs"))


@pytest.mark.parametrize("case", list(CASES))
def test_outputs_are_those_of_the_per_sentence_version(outputs, case):
    expected = json.loads(EXPECTED.read_text("utf-8"))[case]
    assert outputs[case] == expected


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        produced = cli_outputs(scratch)
    EXPECTED.write_text(json.dumps(produced, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {EXPECTED}")
