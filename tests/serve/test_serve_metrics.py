"""`GET /metrics`: requests by route and status, errors, the latency histogram, the queue's
depth and the batches' sizes, in Prometheus's text format, read back with
prometheus-client's own parser (in-process, over a fake model); behind the token when
there is one.
"""

import threading
import time

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from fake_server import LOOPBACK, FakeModel

from attncli.serve.app import create_app
from attncli.serve.limits import Limits
from attncli.serve.registry import Registry

TOKEN = "s3cr3t"


def fake_app(token=None):
    registry = Registry([("fake", [])], Limits())
    registry.models = {"fake": FakeModel()}
    registry.ready = True
    return create_app(registry, registry.limits, token=token), registry.models["fake"]


def scraped(client, **headers):
    """`{(name, labels as a sorted tuple of pairs): value}` of every sample of /metrics."""
    answer = client.get("/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(answer.text)
            for sample in family.samples}


def test_requests_errors_latency_and_batches_are_counted():
    app, _ = fake_app()
    with TestClient(app, base_url=LOOPBACK, raise_server_exceptions=False) as client:
        assert client.post("/translate", json={"texts": ["a b", "c", "d"]}).status_code == 200
        assert client.post("/translate", json={"texts": ["e"]}).status_code == 200
        assert client.post("/translate", content=b"{", headers={
            "content-type": "application/json"}).status_code == 400
        for path in ("/nothing", "/made/up/1", "/made/up/2"):
            assert client.get(path).status_code == 404
        app.state.batcher.run = lambda key, texts: 1 / 0
        assert client.post("/translate", json={"texts": ["f"]}).status_code == 500
        samples = scraped(client)

    def value(name, **labels):
        return samples.get((name, tuple(sorted(labels.items()))), 0)

    assert value("attncli_requests_total", route="/translate", status="200") == 2
    assert value("attncli_requests_total", route="/translate", status="400") == 1
    assert value("attncli_requests_total", route="/translate", status="500") == 1
    # Made-up paths are one series, not one each.
    assert value("attncli_requests_total", route="other", status="404") == 3
    assert value("attncli_errors_total", route="/translate", kind="client") == 1
    assert value("attncli_errors_total", route="/translate", kind="server") == 1
    assert value("attncli_errors_total", route="other", kind="client") == 3
    # Every /translate answered, whatever its status, has its time.
    assert value("attncli_request_seconds_count", route="/translate") == 4
    assert value("attncli_request_seconds_bucket", route="/translate", le="+Inf") == 4
    assert value("attncli_request_seconds_sum", route="/translate") > 0
    # The 4 texts of the two good requests went through batches (however merged); the
    # failing run was replaced, so it is not counted.
    assert value("attncli_batch_texts_sum") == 4
    assert 1 <= value("attncli_batch_texts_count") <= 2
    assert value("attncli_batch_texts_bucket", le="2.0") + 1 >= value(
        "attncli_batch_texts_count")
    assert value("attncli_queue_texts") == 0


def test_the_queue_depth_is_read_when_scraped():
    app, model = fake_app()
    model.release.clear()
    with TestClient(app, base_url=LOOPBACK) as client:
        waiting = threading.Thread(target=client.post, args=("/translate",),
                                   kwargs={"json": {"texts": ["a", "b", "c"]}})
        waiting.start()
        try:
            deadline = time.monotonic() + 30
            while app.state.batcher.pending < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert scraped(client)[("attncli_queue_texts", ())] == 3
        finally:
            model.release.set()
            waiting.join()
        assert scraped(client)[("attncli_queue_texts", ())] == 0


def test_metrics_need_the_token_when_there_is_one():
    app, _ = fake_app(token=TOKEN)
    with TestClient(app, base_url=LOOPBACK) as client:
        refused = client.get("/metrics")
        assert refused.status_code == 401 and "attncli_" not in refused.text
        samples = scraped(client, authorization=f"Bearer {TOKEN}")
    # The refusal itself was counted.
    assert samples[("attncli_requests_total", (("route", "/metrics"), ("status", "401")))] == 1


@pytest.mark.parametrize("token", [None, TOKEN])
def test_two_servers_in_one_process_count_apart(token):
    first, _ = fake_app(token)
    second, _ = fake_app(token)
    headers = {"authorization": f"Bearer {TOKEN}"} if token else {}
    with TestClient(first, base_url=LOOPBACK) as one, \
            TestClient(second, base_url=LOOPBACK) as other:
        one.get("/health", headers=headers)
        samples = scraped(other, **headers)
    assert ("attncli_requests_total", (("route", "/health"), ("status", "200"))) not in samples
