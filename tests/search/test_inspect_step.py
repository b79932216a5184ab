"""`inspect-weights --step`: the printed figures against a NumPy recomputation.

A tiny run of each decoder style (Luong's is the session's tiny run,
`attncli_runs.trained`, whose config is Luong's decoder with the general score; Bahdanau's
is trained here); the step table `attncli inspect-weights
RUN --text ... --step T` prints (its query, every source position's score and softmax
weight, and the context) is read back and compared with tests/numpy_decoders.py run
over the same tokens from the saved weights: the query is `s_{T-1}` for Bahdanau's
decoder and `h_T` for Luong's.
"""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
from attncli_runs import trained  # noqa: F401 (a fixture)
from numpy_decoders import reference_decode
from typer.testing import CliRunner

from attncli.cli.app import app

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny-test.yaml"
TEXT = "Tengo un gato."
DECIMALS = 7
# A printed figure is off by at most half its last digit, plus float32 round-off.
PRINTED = dict(rtol=1e-5, atol=6e-7)

pytestmark = pytest.mark.slow

# The settings a run of each style adds to the tiny config; None: the session's tiny
# run, the same config (its decoder is Luong's, its score general), trained once.
RUNS = {
    "bahdanau-additive": ["model.decoder=bahdanau", "model.score=additive"],
    "luong-general": None,
}


def invoke(*args):
    # Piped output without COLUMNS (pytest-xdist's workers set it to 80): full width.
    result = CliRunner().invoke(app, [str(arg) for arg in args], prog_name="attncli",
                                env={"COLUMNS": None, "LINES": None})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request, tmp_path_factory):
    if RUNS[request.param] is None:
        path = request.getfixturevalue("trained")
        model = json.loads((path / "model" / "config.json").read_text())["model"]
        assert (model["decoder"], model["score"]) == ("luong", "general"), model
        return path
    path = tmp_path_factory.mktemp(request.param) / "run"
    settings = [arg for setting in RUNS[request.param] for arg in ("--set", setting)]
    invoke("train", TINY, "--run-dir", path, "--set", "training.epochs=1", *settings)
    return path


def numbers(text):
    return [float(number) for number in re.findall(r"-?\d+\.\d+", text)]


def read_step_table(output, step):
    """`query` (first values, norm), `scores`, `weights`, `context` (first values, norm)
    and the output token, as printed."""
    table = output[output.index(f"output token {step} "):]
    title = " ".join(table[:table.index("┏")].split())
    token, query = re.match(r"output token \d+ '([^']*)' .*query (\[.*‖)", title).groups()
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in table.splitlines() if line.startswith("│")
    ]
    positions = [row for row in rows if row[0].isdigit()]
    [total] = [row for row in rows if row[0] == "4. sum"]
    return {
        "token": token,
        "query": numbers(query),
        "scores": np.array([float(row[3]) for row in positions]),
        "weights": np.array([float(row[4]) for row in positions]),
        "context": numbers(total[5]),
    }


def assert_short_vector(printed, vector):
    """`[v_1, .., v_4, …] ‖v‖` as `_short` prints it."""
    *head, norm = printed
    np.testing.assert_allclose(head, vector[: len(head)], **PRINTED)
    np.testing.assert_allclose(norm, np.linalg.norm(vector), **PRINTED)


def test_step_table_prints_the_models_attention_at_that_step(run):
    from attncli.data.vocabulary import START
    from attncli.search.loading import load_model

    # The hypothesis the command walks along: the run's own search, greedy.
    loaded = load_model(run / "model")
    translator = loaded.translator(dataclasses.replace(loaded.search, beam_size=1, n_best=1))
    [translation] = translator.translate([TEXT])
    tokens = list(translation.hypotheses[0].tokens)
    step = min(3, len(tokens))
    printed = read_step_table(
        invoke("inspect-weights", run, "--text", TEXT, "--beam", 1, "--step", step,
               "--decimals", DECIMALS),
        step,
    )
    assert printed["token"] == tokens[step - 1]

    model = loaded.model
    _, source_ids = translator.source_ids([TEXT])
    annotations, final_state, _ = model.encoder(source_ids)
    vocabulary = loaded.target_tokenizer.vocabulary
    target_in = np.array([[START] + [vocabulary.id_of(token) for token in tokens[: step - 1]]])
    reference = reference_decode(
        model, source_ids.numpy(), target_in, annotations.numpy(),
        [state.numpy() for state in final_state],
    )
    expected = {name: values[0, step - 1] for name, values in reference.items()}
    np.testing.assert_allclose(printed["scores"], expected["scores"], **PRINTED)
    np.testing.assert_allclose(printed["weights"], expected["weights"], **PRINTED)
    assert_short_vector(printed["query"], expected["queries"])
    assert_short_vector(printed["context"], expected["contexts"])
