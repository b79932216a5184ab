"""`attncli serve DIR --engine ctranslate2`: a CTranslate2 export served without
TensorFlow, as a user runs it, on the tiny Transformer test_ctranslate2_export exports
(built once a session, shared with it).

Its translations are `attncli translate DIR --engine ctranslate2`'s for the same lines and
settings; its attention weights and its prefixed translations are the TensorFlow model's
(the run the export was made of); what CTranslate2 cannot give is refused in one line;
the page says the attention view is not available; the server process never imports
TensorFlow (its `sys.modules`, printed when it stops).
"""

import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import process_watch
import pytest
from attncli_runs import ENV
from cli_errors import one_line_error
from typer.testing import CliRunner

ctranslate2 = pytest.importorskip("ctranslate2")

from ctranslate2_runs import exported, validation_sentences  # noqa: E402, F401
from browser import browser, tab  # noqa: E402, F401 (fixtures)

from attncli.cli.app import app  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("serve-ctranslate2")]

TIMEOUT = 120
WRONG = ["", "   ", "123", "¿Qué hora es?"]


@pytest.fixture(scope="module")
def served(exported, tmp_path_factory):  # noqa: F811 (the fixture)
    """`attncli serve EXPORT --engine ctranslate2 --port 0`, ready, in a Python that prints
    `HEAVY [...]`, the heavy modules imported, when the command ends: `(process, base
    URL, stderr file, stdout file)`; its last test stops it."""
    _, export = exported
    folder = tmp_path_factory.mktemp("serve-ctranslate2")
    code = textwrap.dedent(f"""
        import runpy, sys
        sys.argv = ["attncli", "serve", {str(export)!r}, "--engine", "ctranslate2",
                    "--port", "0"]
        try:
            runpy.run_module("attncli", run_name="__main__")
        except SystemExit as exit:
            code = exit.code
        print("HEAVY", sorted(name for name in ("tensorflow", "keras", "tensorflow_text")
                              if name in sys.modules), flush=True)
        sys.exit(code)
    """)
    log, output = folder / "stderr.txt", folder / "stdout.txt"
    with log.open("w") as stderr, output.open("w") as stdout:
        process = subprocess.Popen([sys.executable, "-c", code], cwd=folder, env=ENV,
                                   stdout=stdout, stderr=stderr, text=True)
    try:
        yield process, ready(process, log), log, output
    finally:
        if process.poll() is None:
            process.kill()
        process_watch.wait(process)


def ready(process, log):
    """Waits as long as the server works (`process_watch`) for its /health to answer 200;
    returns its base URL."""
    watch = process_watch.Watch([process])
    while True:
        if process.poll() is not None:
            raise AssertionError(f"the server ended:\n{log.read_text()}")
        found = re.search(r"serving on (http://127\.0\.0\.1:\d+)", log.read_text())
        if found and httpx.get(found.group(1) + "/health").status_code == 200:
            return found.group(1)
        watch.check()
        time.sleep(0.1)


@pytest.fixture(scope="module")
def lines(exported):  # noqa: F811 (the fixture)
    run, _ = exported
    return validation_sentences(run)[:12] + WRONG


def post(url, path, body):
    return httpx.post(url + path, json=body, timeout=TIMEOUT)


def translate_engine(export, lines, tmp_path, *options):
    """`attncli translate EXPORT --input LINES --engine ctranslate2 OPTIONS --format
    json`, in this process: one JSON object per line."""
    (tmp_path / "lines.txt").write_text("\n".join(lines) + "\n", "utf-8")
    result = CliRunner().invoke(app, ["translate", str(export), "--input",
                                      str(tmp_path / "lines.txt"), "--engine", "ctranslate2",
                                      "--format", "json", *map(str, options)])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_models_say_the_engine_and_why_there_is_no_attention_view(served, exported):  # noqa: F811
    _, url, _, _ = served
    _, export = exported
    [model] = httpx.get(url + "/models").json()["models"]
    settings = json.loads((export / "attncli-ctranslate2.json").read_text("utf-8"))
    assert (model["name"], model["engine"]) == (export.name, "ctranslate2")
    assert model["decoding"] == settings["decoding"]
    assert "not available with the ctranslate2 engine" in model["inspect_refusal"]


@pytest.mark.parametrize("beam", [1, 5])
def test_translations_equal_translate_engine_ctranslate2(
        served, exported, lines, beam, tmp_path):  # noqa: F811 (exported: the fixture)
    _, url, _, _ = served
    _, export = exported
    printed = translate_engine(export, lines, tmp_path, "--beam", beam, "--n-best", beam)
    answer = post(url, "/translate", {"texts": lines, "beam": beam, "n_best": beam,
                                      "attention": True})
    assert answer.status_code == 200, answer.text
    for line, translated in zip(printed, answer.json()["translations"], strict=True):
        if not line["hypotheses"]:  # an empty line
            assert translated == {"text": "", "score": None, "hypotheses": []}
            continue
        assert translated["source_tokens"] == line["source_tokens"]
        assert translated["text"] == line["hypotheses"][0]["text"]
        assert len(translated["hypotheses"]) == len(line["hypotheses"])
        for served_one, printed_one in zip(translated["hypotheses"], line["hypotheses"]):
            assert (served_one["text"], served_one["tokens"]) == (printed_one["text"],
                                                                  printed_one["tokens"])
            assert served_one["score"] == pytest.approx(printed_one["score"], abs=1e-5)
            np.testing.assert_allclose(np.reshape(served_one["weights"], (-1,)),
                                       np.reshape(printed_one["weights"], (-1,)), atol=2e-5)


def test_concurrent_clients_of_other_settings_get_their_own_answers(served, lines):
    """Requests of three settings at once are batched apart and each answered as alone
    (CTranslate2's sums over a batch may round the last bit of a score otherwise)."""
    _, url, _, _ = served
    bodies = [{"texts": [text], "beam": beam, "attention": attention}
              for text in lines[::2] for beam, attention in ((1, False), (5, False), (1, True))]
    alone = [post(url, "/translate", body).json()["translations"] for body in bodies]
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(
            lambda body: post(url, "/translate", body).json()["translations"], bodies))
    for [batched], [single] in zip(together, alone, strict=True):
        assert batched.keys() == single.keys()
        assert batched["text"] == single["text"]
        assert batched.get("tokens") == single.get("tokens")
        if single["score"] is not None:
            assert batched["score"] == pytest.approx(single["score"], abs=1e-5)


def test_attention_and_prefixes_are_the_tensorflow_model_s(served, exported, lines):  # noqa: F811
    """The weights CTranslate2 returns are the last block's cross-attention averaged over
    the heads, the `weights` of attncli's search; a prefix is forced as attncli forces it
    and scored with it (greedy: attncli's own search, token for token)."""
    from attncli.search.alignments import align_translation
    from attncli.search.loading import load_model

    _, url, _, _ = served
    run, export = exported
    texts = [text for text in lines if text.strip() and text != "123"]
    loaded = load_model(run / "model")
    translator = loaded.translator(loaded.search.adjusted(beam_size=1, n_best=1),
                                   attention_weights=True)
    levels = loaded.source_tokenizer.level, loaded.target_tokenizer.level
    word = (export / "target.vocab.txt").read_text("utf-8").split("\n")[20]  # a frequent one
    for prefix in ("", word):
        wanted = translator.translate(texts, prefixes=[prefix] * len(texts))
        answer = post(url, "/translate", {"texts": texts, "beam": 1, "prefix": prefix,
                                          "attention": True, "alignments": True})
        assert answer.status_code == 200, answer.text
        for translation, served_one in zip(wanted, answer.json()["translations"], strict=True):
            [hypothesis] = translation.hypotheses
            assert served_one["tokens"] == hypothesis.tokens
            assert served_one["text"] == hypothesis.text
            if prefix:
                assert hypothesis.tokens[0] == prefix
            assert served_one["score"] == pytest.approx(hypothesis.score, abs=1e-4)
            np.testing.assert_allclose(served_one["weights"], hypothesis.weights, atol=1e-4)
            [links] = align_translation(translation, *levels)[1]
            assert served_one["alignment"] == links.pharaoh()


@pytest.mark.parametrize("path, body, fragment", [
    ("/translate", {"texts": ["hola"], "sampling": "random"}, "sampling is not available"),
    ("/translate", {"texts": ["hola"], "token_log_probs": True},
     "token_log_probs is not available"),
    ("/translate", {"texts": ["hola"], "temperature": 0.5}, "temperature applies to sampling"),
    ("/translate", {"texts": ["hola"], "prefix": "[END] tom"}, "reserved token"),
    ("/translate", {"texts": ["hola"], "prefix": "zzqx"}, "[UNK] only"),
    ("/inspect", {"text": "hola"}, "attention view (/inspect, /step) is not available"),
    ("/step", {"text": "hola", "step": 1}, "attention view (/inspect, /step) is not available"),
])
def test_what_ctranslate2_cannot_give_is_refused_in_one_line(served, path, body, fragment):
    _, url, _, _ = served
    refused = post(url, path, body)
    assert refused.status_code == 422
    assert fragment in refused.json()["error"]
    assert "\n" not in refused.json()["error"]
    assert post(url, "/translate", {"texts": ["hola"]}).status_code == 200


def test_the_page_says_the_attention_view_is_not_available(served, tab):  # noqa: F811
    _, url, _, _ = served
    tab.set_viewport_size({"width": 1280, "height": 800})
    tab.goto(url + "/")
    tab.wait_for_selector("#model option", state="attached")
    assert tab.is_hidden("#references") and tab.is_hidden("#golds")  # no attention to show
    tab.fill("#texts", "tom is here.\nhola")
    tab.click("#submit")
    tab.wait_for_selector("#no-attention:not([hidden])")
    assert len(tab.query_selector_all("#translations > li")) == 2
    assert "not available with the ctranslate2 engine" in tab.inner_text("#no-attention")
    assert tab.is_hidden("#attention") and tab.is_hidden("#error")
    assert tab.query_selector_all(".inspect") == []
    assert not any("/inspect" in request for request in tab.requests)


def test_int8_weights_are_served_too(exported):  # noqa: F811
    from fastapi.testclient import TestClient

    from attncli.serve.app import create_app
    from attncli.serve.limits import Limits
    from attncli.serve.registry import Registry

    _, export = exported
    registry = Registry([("int8", [export])], Limits(), "ctranslate2", {"compute_type": "int8"})
    with TestClient(create_app(registry, registry.limits, load=registry.load),
                    base_url="http://127.0.0.1") as client:
        while client.get("/health").status_code != 200:
            time.sleep(0.05)
        answer = client.post("/translate", json={"texts": ["tom is here."]})
    assert answer.status_code == 200 and answer.json()["translations"][0]["text"]
    assert registry.models["int8"].exported.translator.compute_type.startswith("int8")


def test_engine_mistakes_are_one_line_before_the_server_starts(exported, monkeypatch):  # noqa: F811
    run, export = exported

    def refusal(*arguments):
        result = CliRunner().invoke(app, ["serve", *map(str, arguments), "--port", "0"])
        assert "serving on" not in result.stderr
        return one_line_error(result)

    assert "is no CTranslate2 export" in refusal(run, "--engine", "ctranslate2")
    assert "is no CTranslate2 export" in refusal(export, "--engine", "ctranslate2",
                                                 "--model", f"other={run}")
    assert ("is a CTranslate2 export: serve it with --engine ctranslate2"
            in refusal(export))
    assert "--compute-type is for --engine ctranslate2" in refusal(export, "--compute-type",
                                                                   "int8")
    assert "is not one; choose float32 or int8" in refusal(
        export, "--engine", "ctranslate2", "--compute-type", "int4")
    assert "--ensemble needs the TensorFlow search" in refusal(
        export, "--engine", "ctranslate2", "--ensemble", export)
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # not installed
    assert "needs the ctranslate2 package" in refusal(export, "--engine", "ctranslate2")


def test_it_never_imports_tensorflow_and_stops_on_sigterm(served):
    """The module's last test: it stops the server."""
    process, url, log, output = served
    assert post(url, "/translate", {"texts": ["tom is here."], "attention": True,
                                    "alignments": True}).status_code == 200
    assert httpx.get(url + "/").status_code == 200
    process.send_signal(signal.SIGTERM)
    assert process_watch.wait(process) == 0, log.read_text()
    assert output.read_text().splitlines() == ["HEAVY []"]
    assert log.read_text().splitlines()[-1] == "stopped"
