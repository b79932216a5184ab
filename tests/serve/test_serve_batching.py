"""The server's parts without a model: the batcher's fairness, queue and failures; the
application's full-queue answer and token, over a registry of a fake model; the
command's arguments, refused before anything loads."""

import asyncio
import socket
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from attncli.cli.app import app
from attncli.cli.serve_command import model_specs
from attncli.serve.batching import QueueFull
from attncli.serve.limits import RequestError
from fake_server import LOOPBACK, batcher, fake_app


def test_a_large_request_does_not_starve_fifty_small_ones():
    batches = []

    def run(key, texts):
        batches.append(list(texts))
        return [text.upper() for text in texts]

    async def main():
        worker = batcher(run, chunk_texts=16)
        large = worker.submit("greedy", [f"large {i}" for i in range(500)])
        small = [worker.submit("greedy", [f"small {i}"]) for i in range(50)]
        worker.start()  # after every request arrived: the first batch sees them all
        results = await asyncio.gather(large, *small)
        worker.close()
        return results

    large, *small = asyncio.run(main())
    assert large == [f"LARGE {i}" for i in range(500)]
    assert small == [[f"SMALL {i}"] for i in range(50)]
    assert {f"small {i}" for i in range(50)} <= set(batches[0])
    assert all(len(batch) <= 100 for batch in batches)
    assert len(batches) == 6  # 550 texts, at most 100 a batch


def test_requests_with_other_settings_are_batched_apart():
    batches = []

    def run(key, texts):
        batches.append((key, list(texts)))
        return texts

    async def main():
        worker = batcher(run)
        futures = [worker.submit(key, [f"{key} {i}"]) for i in range(3) for key in "ab"]
        worker.start()
        await asyncio.gather(*futures)
        worker.close()

    asyncio.run(main())
    assert sorted(batches) == [("a", ["a 0", "a 1", "a 2"]), ("b", ["b 0", "b 1", "b 2"])]


def test_a_full_queue_refuses_and_frees_its_room_when_done():
    release = threading.Event()

    def run(key, texts):
        release.wait(30)
        return texts

    async def main():
        worker = batcher(run, max_queue=10)
        worker.start()
        first = worker.submit("k", ["a"] * 8)
        with pytest.raises(QueueFull, match="8 of 10"):
            worker.submit("k", ["b"] * 3)
        second = worker.submit("k", ["c"] * 2)
        release.set()
        answers = await asyncio.gather(first, second)
        third = await worker.submit("k", ["d"] * 10)
        worker.close()
        return answers, third, worker.pending

    (first, second), third, pending = asyncio.run(main())
    assert (first, second, third, pending) == (["a"] * 8, ["c"] * 2, ["d"] * 10, 0)


def test_a_failed_batch_fails_its_requests_and_the_next_batch_is_served():
    def run(key, texts):
        if "bad" in texts:
            raise RuntimeError("the model failed")
        return texts

    def measure(key, requests):
        return [RequestError(413, "too long") if "refused" in texts else [1] * len(texts)
                for texts in requests]

    async def main():
        worker = batcher(run, measure=measure)
        worker.start()
        with pytest.raises(RuntimeError, match="the model failed"):
            await worker.submit("k", ["bad"])
        with pytest.raises(RequestError, match="too long"):
            await worker.submit("k", ["refused"])
        good = await worker.submit("k", ["good"])
        worker.close()
        return good, worker.pending

    assert asyncio.run(main()) == (["good"], 0)


def test_close_finishes_what_was_submitted():
    async def main():
        worker = batcher(lambda key, texts: texts, batch_wait=0.05)
        worker.start()
        futures = [worker.submit("k", [str(i)]) for i in range(20)]
        await asyncio.to_thread(worker.close)
        return [future.result() for future in futures]

    assert asyncio.run(main()) == [[str(i)] for i in range(20)]


def test_a_full_queue_is_a_503_with_retry_after_and_the_next_request_is_served():
    app, model = fake_app(max_queue=4, max_texts=4)
    model.release.clear()
    with TestClient(app, base_url=LOOPBACK) as client:
        waiting = threading.Thread(
            target=lambda: client.post("/translate", json={"texts": ["ab", "cd", "ef"]}))
        waiting.start()
        while client.get("/health").json()["queued"] < 3:
            pass
        refused = client.post("/translate", json={"texts": ["gh", "ij"]})
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert "queue is full" in refused.json()["error"]
        model.release.set()
        waiting.join()
        served = client.post("/translate", json={"texts": ["gh", "ij"]})
    assert [item["text"] for item in served.json()["translations"]] == ["hg", "ji"]


def test_the_token_is_needed_by_every_request():
    app, _ = fake_app(token="s3cret")
    with TestClient(app, base_url=LOOPBACK) as client:
        # A path that exists or not: 401 either way, so paths are not told apart.
        for path in ("/health", "/models", "/", "/docs", "/openapi.json", "/nothing"):
            refused = client.get(path)
            assert refused.status_code == 401, path
            assert refused.headers["www-authenticate"] == "Bearer"
        body = {"texts": ["ab"]}
        assert client.post("/translate", json=body).status_code == 401
        wrong = {"Authorization": "Bearer s3cre"}
        assert client.post("/translate", json=body, headers=wrong).status_code == 401
        good = {"Authorization": "Bearer s3cret"}
        answer = client.post("/translate", json=body, headers=good)
        assert answer.json()["translations"][0]["text"] == "ba"
        assert client.get("/health", headers=good).status_code == 200


def test_the_page_opened_with_its_token_sets_a_cookie_its_requests_carry():
    app, _ = fake_app(token="s3cret")
    with TestClient(app, base_url=LOOPBACK) as client:
        assert client.get("/?token=wrong").status_code == 401
        page = client.get("/?token=s3cret")
        assert page.status_code == 200
        assert "HttpOnly" in page.headers["set-cookie"]
        # The client keeps the cookie, as a browser does.
        assert client.post("/translate", json={"texts": ["ab"]}).status_code == 200


# --- the command's arguments, checked before anything loads -------------------------

FIXTURE_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "run-0.1.0"


def test_runs_are_served_under_their_names():
    specs = model_specs(FIXTURE_RUN, [FIXTURE_RUN], [f"g2p={FIXTURE_RUN / 'model'}"])
    assert specs == [("run-0.1.0", [FIXTURE_RUN / "model", FIXTURE_RUN / "model"]),
                     ("g2p", [FIXTURE_RUN / "model"])]
    assert model_specs(FIXTURE_RUN / "model", [], [])[0][0] == "run-0.1.0"


@pytest.mark.parametrize("args, fragment", [
    ([], "give a RUN to serve"),
    (["--ensemble", str(FIXTURE_RUN)], "--ensemble decodes other runs together with RUN"),
    ([str(FIXTURE_RUN), "--model", "noequals"], "write NAME=RUN"),
    ([str(FIXTURE_RUN), "--model", "a b=x"], "a name is letters"),
    ([str(FIXTURE_RUN), "--model", f"run-0.1.0={FIXTURE_RUN}"], "two models are named"),
    ([str(FIXTURE_RUN), "--max-texts", "5000"], "--max-texts (5000) is larger than"),
    ([str(FIXTURE_RUN), "--batch-tokens", "0"], "--batch-tokens must be >= 1"),
    ([str(FIXTURE_RUN), "--token", " "], "--token is empty"),
    # A cookie would cut the first at ';', and HTTP headers cannot carry the second.
    ([str(FIXTURE_RUN), "--token", "s3c;ret"], "--token may hold letters, digits"),
    ([str(FIXTURE_RUN), "--token", "sécret"], "--token may hold letters, digits"),
    ([str(FIXTURE_RUN), "--host", "no.such.host.invalid"], "--host no.such.host.invalid"),
    ([str(FIXTURE_RUN), "--port", "-1"], "--port -1: a port is 0 to 65535 (0 picks a free one)"),
    ([str(FIXTURE_RUN), "--port", "65536"], "--port 65536: a port is 0 to 65535"),
])
def test_serve_refuses_bad_arguments_in_one_line_before_loading(args, fragment):
    result = CliRunner().invoke(app, ["serve", *args], prog_name="attncli")
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and fragment in line, line


def test_a_port_in_use_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", str(FIXTURE_RUN), "--port", str(port)])
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
