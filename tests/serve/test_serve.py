"""`attncli serve` as a user runs it, on a free loopback port, serving a tiny run trained
once; its answers compared with `attncli translate`'s for the same lines and settings,
under concurrent clients, after bad requests, and when it is stopped with SIGTERM while
requests are in flight. A second server serves several models by name, its default one
an ensemble, each compared with `attncli translate` of the same runs.
"""

import contextlib
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import h5py
import httpx
import numpy as np
import process_watch
import pytest
from attncli_runs import ENV, trained  # noqa: F401 (a fixture)
from typer.testing import CliRunner

from attncli.cli.app import app

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("serve")]

LINES = [
    "tom is here.", "he is tall.", "i like it.", "¿dónde está tom?", "we are happy.",
    "", "it is cold today.", "she reads a book.", "   ", "they run fast.",
    "the cat is black.", "do you know him?",
]
BEAM = {"beam": 2, "n_best": 2, "alignments": True, "attention": True}
# Small enough that the bad requests below meet each limit with little data.
LIMITS = ["--max-body-bytes", 300_000, "--max-texts", 100, "--max-chars", 2000,
          "--max-queue", 1000, "--max-beam", 16]
TIMEOUT = 300


# A run of attncli 0.1.0 (tests/workflow/test_old_run.py): other weights and other vocabularies.
OLD_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "run-0.1.0"


@pytest.fixture(scope="module")
def started(trained, tmp_path_factory):  # noqa: F811 (the fixture)
    """`attncli serve RUN --port 0`, ready, and `attncli translate` of LINES (run in this
    process while the server loads): `(process, base URL, greedy text lines, beam 2 JSON
    lines with two hypotheses and alignments)`."""
    folder = tmp_path_factory.mktemp("serve")
    with serving(folder, trained, *LIMITS) as (process, ready):
        (greedy, beam) = translated(folder, [
            [trained, "--beam", 1],
            [trained, "--beam", 2, "--n-best", 2, "--alignments", "--format", "json"],
        ])
        yield (process, ready(), greedy.split("\n")[:-1],
               [json.loads(line) for line in beam.splitlines()])


@pytest.fixture(scope="module")
def several(trained, tmp_path_factory):  # noqa: F811 (the fixture)
    """`attncli serve RUN --ensemble MEMBER --model old=OLD --model alone=RUN`, ready,
    where MEMBER is RUN with its weights moved at random and OLD the run of attncli 0.1.0;
    and `attncli translate` of LINES by each model, in JSON: `(base URL, {name: [line
    as JSON, ...]})`."""
    folder = tmp_path_factory.mktemp("serve-several")
    member, old = folder / "member", folder / "old"
    shutil.copytree(trained, member)
    shutil.copytree(OLD_RUN, old)
    random = np.random.default_rng(0)
    with h5py.File(member / "model" / "model.weights.h5", "r+") as weights:
        arrays = []
        weights.visititems(lambda name, item: arrays.append(item)
                           if isinstance(item, h5py.Dataset) else None)
        for array in arrays:
            array[...] = array[...] * (1 + 0.5 * random.standard_normal(array.shape))
    runs = {"run": [trained, "--ensemble", member], "old": [old], "alone": [trained]}
    with serving(folder, trained, "--ensemble", member, "--model", f"old={old}",
                 "--model", f"alone={trained}") as (_, ready):
        outputs = translated(folder, [[*options, "--format", "json"]
                                      for options in runs.values()])
        yield ready(), {name: [json.loads(line) for line in output.splitlines()]
                        for name, output in zip(runs, outputs)}


@contextlib.contextmanager
def serving(folder, *arguments):
    """`attncli serve ARGUMENTS --port 0` started in `folder`: `(process, ready)`, where
    `ready()` waits for its /health and returns its base URL; stopped with SIGTERM."""
    log = folder / "stderr.txt"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "attncli", "serve", *map(str, arguments), "--port", "0"],
            cwd=folder, env=ENV, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
        )
    try:
        yield process, lambda: _wait_ready(process, log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process_watch.wait(process)
        finally:
            process.kill()


def translated(folder, commands):
    """The stdout of `attncli translate RUN --input LINES OPTIONS` for each `[RUN,
    *OPTIONS]` of `commands`, in this process while the server loads (what is compared is
    what translate prints; it runs as a process of its own in test_workflow and
    test_translate_stream)."""
    (folder / "lines.txt").write_text("\n".join(LINES) + "\n", "utf-8")
    outputs = []
    for run, *options in commands:
        result = CliRunner().invoke(app, ["translate", str(run), "--input",
                                          str(folder / "lines.txt"), *map(str, options)])
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout)
    return outputs


@pytest.fixture
def server(started):
    """`(server process, base URL)`."""
    return started[:2]


@pytest.fixture
def offline(started):
    """`attncli translate` of LINES: greedy text lines, and beam 2 JSON lines."""
    return started[2:]


def _wait_ready(process, log):
    """Waits as long as the server works (`process_watch`) for its /health to answer 200;
    returns its base URL."""
    watch, url = process_watch.Watch([process]), None
    while True:
        if process.poll() is not None:
            raise AssertionError(f"the server ended:\n{log.read_text()}")
        if url is None:
            found = re.search(r"serving on (http://127\.0\.0\.1:\d+)", log.read_text())
            if found:
                url = found.group(1)
                assert httpx.get(url + "/health").status_code in (200, 503)
        elif httpx.get(url + "/health").status_code == 200:
            return url
        watch.check()
        time.sleep(0.2)


def post(url, path, body, **headers):
    content = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    return httpx.post(url + path, content=content, timeout=TIMEOUT,
                      headers={"content-type": "application/json", **headers})


def assert_like_translate(translated, greedy_line=None, beam_line=None):
    """`translated` (one object of a response) as translate printed the same line."""
    if greedy_line is not None:
        assert translated["text"] == greedy_line
        return
    hypotheses = beam_line["hypotheses"]
    if not hypotheses:
        assert translated == {"text": "", "score": None, "hypotheses": []}
        return
    assert translated["text"] == hypotheses[0]["text"]
    assert translated["source_words"] == beam_line["source_words"]
    assert translated["source_tokens"] == beam_line["source_tokens"]
    assert len(translated["hypotheses"]) == len(hypotheses) == 2
    for served, printed in zip(translated["hypotheses"], hypotheses):
        assert served["text"] == printed["text"]
        assert served["score"] == pytest.approx(printed["score"], abs=1e-4)
        assert served["words"] == printed["words"]
        assert served["alignment"] == printed["alignment"]
        assert served["tokens"] == printed["tokens"]
        assert served["weights"] == [pytest.approx(row, abs=1e-4) for row in printed["weights"]]
    assert {key: translated[key] for key in ("text", "score", "words", "alignment")} == {
        key: translated["hypotheses"][0][key] for key in ("text", "score", "words", "alignment")}


def test_health_and_models(server):
    _, url = server
    assert httpx.get(url + "/health").json()["status"] == "ready"
    [model] = httpx.get(url + "/models").json()["models"]
    assert model["name"] == "run"
    assert (model["task"], model["source_level"], model["target_level"]) == (
        "translation", "word", "word")
    assert model["decoding"]["beam_size"] == 2
    assert "/translate" in httpx.get(url + "/openapi.json").json()["paths"]


def test_translations_equal_translate_greedy_and_beam(server, offline):
    _, url = server
    greedy_lines, beam_lines = offline
    greedy = post(url, "/translate", {"texts": LINES, "beam": 1})
    assert greedy.status_code == 200, greedy.text
    assert [item["text"] for item in greedy.json()["translations"]] == greedy_lines
    beam = post(url, "/translate", {"texts": LINES, **BEAM})
    assert beam.status_code == 200, beam.text
    for translated, line in zip(beam.json()["translations"], beam_lines, strict=True):
        assert_like_translate(translated, beam_line=line)


def test_64_concurrent_clients_get_their_own_translations_in_order(server, offline):
    _, url = server
    greedy_lines, beam_lines = offline
    count = len(LINES)

    def client(number):
        # Each client asks for three lines from its own place, greedy or beam.
        indices = [(number + shift) % count for shift in (0, 5, 7)]
        settings = {"beam": 1} if number % 2 else BEAM
        response = post(url, "/translate", {"texts": [LINES[i] for i in indices], **settings})
        return number, indices, response

    with ThreadPoolExecutor(64) as pool:
        answers = list(pool.map(client, range(64)))
    for number, indices, response in answers:
        assert response.status_code == 200, response.text
        translations = response.json()["translations"]
        assert len(translations) == 3
        for index, translated in zip(indices, translations):
            if number % 2:
                assert_like_translate(translated, greedy_line=greedy_lines[index])
            else:
                assert_like_translate(translated, beam_line=beam_lines[index])


BAD_REQUESTS = {
    "malformed JSON": (b'{"texts": ["a"', 400, "not JSON"),
    "not UTF-8": (b'{"texts": ["\xff\xfe"]}', 400, "not UTF-8"),
    "a list for a body": ([1, 2], 422, "body"),
    "texts of the wrong type": ({"texts": "tom is here."}, 422, "texts"),
    "a text of the wrong type": ({"texts": ["a", 3]}, 422, "texts[1]"),
    "a beam of the wrong type": ({"texts": ["a"], "beam": "5"}, 422, "beam"),
    "an unknown field": ({"texts": ["a"], "temperature": 0.5}, 422, "temperature"),
    "no texts field": ({"text": "a"}, 422, "texts"),
    "a lone surrogate": (b'{"texts": ["\\ud800 tom"]}', 422, "surrogate"),
    "100,000 characters": ({"texts": ["tom " * 25_000]}, 413, "--max-chars"),
    "10,000 texts": ({"texts": ["tom"] * 10_000}, 413, "--max-texts"),
    "too large a body": ({"texts": ["tom"], "model": "x" * 400_000}, 413, "--max-body-bytes"),
    "too long a translation": ({"texts": ["tom " * 300]}, 413, "--max-output-tokens"),
    "a beam of 0": ({"texts": ["a"], "beam": 0}, 422, "beam"),
    "a beam of 1,000": ({"texts": ["a"], "beam": 1000}, 422, "beam"),
    "n_best above the beam": ({"texts": ["a"], "beam": 2, "n_best": 3}, 422, "n_best"),
    "a negative alpha": ({"texts": ["a"], "alpha": -1.0}, 422, "alpha"),
    "an unknown model": ({"texts": ["a"], "model": "nope"}, 404, "nope"),
    "a file name for a model": ({"texts": ["a"], "model": "/etc/passwd"}, 404, "no model"),
}


@pytest.mark.parametrize("name", BAD_REQUESTS)
def test_a_bad_request_is_refused_in_one_line_and_the_next_is_served(server, offline, name):
    process, url = server
    body, status, fragment = BAD_REQUESTS[name]
    response = post(url, "/translate", body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert fragment in error and "\n" not in error and len(error) < 300
    good = post(url, "/translate", {"texts": ["tom is here."], "beam": 1})
    assert good.status_code == 200
    assert good.json()["translations"][0]["text"] == offline[0][0]
    assert process.poll() is None


def test_empty_and_whitespace_texts_translate_to_empty_lines_as_translate_does(server):
    _, url = server
    response = post(url, "/translate", {"texts": ["", " ", "\t"], "n_best": 1})
    assert response.json() == {"translations": [
        {"text": "", "score": None, "hypotheses": []} for _ in range(3)]}
    assert post(url, "/translate", {"texts": []}).json() == {"translations": []}


def test_other_paths_and_methods_answer_json_errors(server):
    _, url = server
    assert httpx.get(url + "/translate").status_code == 405
    # No path reads a file: not the page's own (inlined into the page), nor one outside.
    for path in ("/nothing", "/static/attention.js", "/attention.js", "/index.html",
                 "/static/../../../etc/passwd", "/..%2F..%2F..%2Fetc%2Fpasswd"):
        response = httpx.get(url + path)
        assert (response.status_code, response.json()) == (404, {"error": "Not Found"}), path


def test_inspect_and_step_give_the_attention_of_the_translation(server, offline):
    _, url = server
    view = post(url, "/inspect", {"text": "tom is here.", "beam": 1})
    assert view.status_code == 200, view.text
    view = view.json()
    assert view["model"] == "run" and view["search"]["beam_size"] == 1
    assert view["hypotheses"][0]["text"] == offline[0][0]
    [cross] = view["attentions"]
    [rows] = cross["layers"][0]["heads"]
    assert len(rows) == len(view["hypotheses"][0]["tokens"])
    assert all(sum(row) == pytest.approx(1.0, abs=1e-5) for row in rows)
    step = post(url, "/step", {"text": "tom is here.", "beam": 1, "step": 1}).json()
    assert step["weights"] == pytest.approx(rows[0], abs=1e-5)
    assert step["key_tokens"] == view["source_tokens"]
    refused = post(url, "/step", {"text": "tom is here.", "step": 99})
    assert refused.status_code == 422 and "step 99" in refused.json()["error"]
    refused = post(url, "/step", {"text": "tom is here.", "attention": "alignment", "step": 1})
    assert refused.status_code == 422 and refused.json()["error"] == (
        "attention alignment: this model has no alignment layer (docs/alignment.md says how "
        "to add one: model.alignment_layer)")
    assert post(url, "/inspect", {"text": " "}).status_code == 422
    too_long = post(url, "/step", {"text": "tom " * 300, "step": 1})
    assert too_long.status_code == 413 and "--max-output-tokens" in too_long.json()["error"]


def test_inspect_and_step_over_a_given_reference_with_its_words_and_gold(server):
    _, url = server
    own = post(url, "/inspect", {"text": "tom is here.", "beam": 1}).json()
    text = own["hypotheses"][0]["text"]
    # The model's own translation as the reference: the same attention, and its score.
    given = post(url, "/inspect", {"text": "tom is here.", "reference": text, "words": True})
    assert given.status_code == 200, given.text
    given = given.json()
    assert given["hypotheses"][0]["tokens"] == own["hypotheses"][0]["tokens"]
    assert given["reference"]["score"] == pytest.approx(own["hypotheses"][0]["score"],
                                                        abs=1e-4)
    assert set(given["reference"]) == {"score", "log_prob", "perplexity"}
    [rows] = given["attentions"][0]["layers"][0]["heads"]
    [own_rows] = own["attentions"][0]["layers"][0]["heads"]
    np.testing.assert_allclose(rows, own_rows, atol=1e-5)
    assert "words" not in own
    words = given["words"]
    assert [word["text"] for word in words["source"]] == ["tom", "is", "here."]
    assert [word["text"] for word in words["target"]] == text.split()
    assert words["attentions"][0]["rows"] == text.split() and "gold" not in words
    # A step of the reference walks its row.
    step = post(url, "/step", {"text": "tom is here.", "reference": text, "step": 1}).json()
    assert step["weights"] == pytest.approx(rows[0], abs=1e-5)
    # Gold links come with the words view, 0-based, the possible ones apart.
    gold = post(url, "/inspect", {"text": "tom is here.", "reference": "a b", "gold": "1-1 3p2"})
    assert gold.status_code == 200, gold.text
    assert gold.json()["words"]["gold"] == {"sure": [[0, 0]], "possible": [[2, 1]]}
    assert gold.json()["hypotheses"][0]["text"] == "a b"


@pytest.mark.parametrize("body, status, fragment", [
    ({"reference": ""}, 422, "reference: it is empty"),
    ({"reference": 3}, 422, "reference: Input should be a valid string"),
    ({"reference": "a", "beam": 2}, 422, "beam: a reference is not searched for"),
    ({"gold": "1-1"}, 422, "gold: gold links join the words of a given translation"),
    ({"reference": "a", "gold": "1-1", "words": False}, 422, "leave \"words\" out"),
    ({"reference": "a", "gold": "1-x"}, 422, "gold: '1-x' is not a gold link"),
    ({"reference": "a", "gold": "1-2"}, 422, "gold: link 0-1 (counted from 0) is past"),
    ({"words": "yes"}, 422, "words: Input should be a valid boolean"),
    ({"reference": "a " * 600}, 413, "reference: its 601 tokens (with [END]) are more than 512"),
])
def test_bad_references_words_and_gold_are_refused_in_one_line(server, body, status, fragment):
    _, url = server
    for path, extra in (("/inspect", {}), ("/step", {"step": 1})):
        response = post(url, path, {"text": "tom is here.", **body, **extra})
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert fragment in error and "\n" not in error, error


def test_models_by_name_are_listed_with_the_ensemble_first(several):
    url, _ = several
    answer = httpx.get(url + "/models").json()
    assert answer["default"] == "run"
    assert [(model["name"], model["members"]) for model in answer["models"]] == [
        ("run", 2), ("old", 1), ("alone", 1)]
    assert httpx.get(url + "/health").json()["models"] == ["run", "old", "alone"]


def test_each_model_translates_as_translate_does_with_the_same_runs(several):
    url, printed = several
    served = {}
    for name in printed:
        body = {"texts": LINES} if name == "run" else {"texts": LINES, "model": name}
        response = post(url, "/translate", body)
        assert response.status_code == 200, response.text
        served[name] = response.json()["translations"]
        for answer, line in zip(served[name], printed[name], strict=True):
            best = line["hypotheses"][:1] or [{"text": "", "score": None}]
            assert answer["text"] == best[0]["text"]
            assert answer["score"] == (None if best[0]["score"] is None
                                       else pytest.approx(best[0]["score"], abs=1e-4))
    # Each name is its own model: the ensemble is not its first run alone, nor the old run.
    scores = {name: [answer["score"] or 0.0 for answer in answers]
              for name, answers in served.items()}
    assert scores["run"] != pytest.approx(scores["alone"], abs=1e-3)
    assert scores["old"] != pytest.approx(scores["alone"], abs=1e-3)


def test_an_unknown_model_is_refused_with_the_names_served(several):
    url, printed = several
    refused = post(url, "/translate", {"texts": LINES[:1], "model": "Alone"})
    assert refused.status_code == 404
    assert refused.json() == {"error": "no model named 'Alone'; this server has 'run', "
                                       "'old', 'alone'"}
    ensemble = post(url, "/inspect", {"text": LINES[0]})
    assert ensemble.status_code == 422 and "ensemble of 2 runs" in ensemble.json()["error"]
    answer = post(url, "/translate", {"texts": LINES[:1], "model": "old"}).json()
    assert answer["translations"][0]["text"] == printed["old"][0]["hypotheses"][0]["text"]


def test_sigterm_finishes_the_requests_in_flight_and_exits_0(server):
    # Last in the module: it stops the module's server.
    process, url = server
    texts = [" ".join(["tom is here and he is tall"] * 6)] * 60
    body = {"texts": texts, "beam": 16, "n_best": 1}

    def all_queued():
        assert not any(future.done() for future in futures)  # all still in flight
        return httpx.get(url + "/health").json()["queued"] >= 8 * len(texts)

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(post, url, "/translate", body) for _ in range(8)]
        process_watch.wait_until(all_queued, process)
        process.send_signal(signal.SIGTERM)
        responses = [future.result() for future in futures]
    assert [response.status_code for response in responses] == [200] * 8
    first = responses[0].json()["translations"]
    assert all(response.json()["translations"] == first for response in responses)
    assert process_watch.wait(process) == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health")
