"""Fair batching without a model: requests of other settings take turns with a large
one, and the texts of a client that left are never computed (a fake model behind a
real uvicorn server, over real sockets)."""

import asyncio
import contextlib
import json
import socket
import threading
import time

import httpx
import uvicorn
from fake_server import batcher, fake_app

from attncli.serve import batching


def test_a_small_request_of_other_settings_waits_one_batch_not_the_large_request():
    batches, first_running, go_on = [], threading.Event(), threading.Event()

    def run(key, texts):
        batches.append((key, len(texts)))
        first_running.set()
        go_on.wait(30)
        return texts

    async def main():
        worker = batcher(run, batch_tokens=100)
        worker.start()
        large = worker.submit("beam 16", [f"large {i}" for i in range(500)])
        await asyncio.to_thread(first_running.wait, 30)
        small = worker.submit("greedy", ["small"])  # while the large one's first batch runs
        go_on.set()
        results = await asyncio.gather(large, small)
        worker.close()
        return results

    large, small = asyncio.run(main())
    assert small == ["small"] and len(large) == 500
    # Its turn comes right after the batch that was running when it arrived.
    assert batches == [("beam 16", 100), ("greedy", 1)] + [("beam 16", 100)] * 4


def test_a_client_sending_one_text_after_another_does_not_starve_a_large_request():
    batches = []

    def run(key, texts):
        batches.append(key)
        return texts

    async def main():
        worker = batcher(run, batch_tokens=100)
        worker.start()
        large = worker.submit("beam 16", [f"large {i}" for i in range(500)])
        sent = 0
        while not large.done() and sent < 100:  # each sent as soon as the last is answered
            await worker.submit("greedy", ["small"])
            sent += 1
        await large
        worker.close()

    asyncio.run(main())
    # The large request's 5 batches take turns with the small ones, never two in a row.
    assert batches.count("beam 16") == 5
    assert ("greedy", "greedy") not in set(zip(batches, batches[1:]))


def test_a_request_of_other_settings_does_not_wait_for_the_clients_of_another_batch(
        monkeypatch):
    # Right after a batch, the batcher waits for the clients it answered to send again,
    # in that batch's group only. The large request answered does not come back: the
    # small one, which waited during its batch, goes at once (with a wait of an hour, it
    # would hang here).
    monkeypatch.setattr(batching, "RETURN_WAIT", 3600)
    batches, running, go_on = [], threading.Event(), threading.Event()

    def run(key, texts):
        batches.append((key, len(texts)))
        running.set()
        go_on.wait(30)
        return texts

    async def main():
        worker = batcher(run, batch_tokens=100)
        worker.start()
        large = worker.submit("beam 16", [f"large {i}" for i in range(100)])  # one batch
        await asyncio.to_thread(running.wait, 30)
        small = worker.submit("greedy", ["small"])
        go_on.set()
        results = await asyncio.wait_for(asyncio.gather(large, small), 60)
        worker.close()
        return results

    large, small = asyncio.run(main())
    assert small == ["small"] and len(large) == 100
    assert batches == [("beam 16", 100), ("greedy", 1)]


def test_the_clients_a_batch_answered_are_waited_for_in_its_own_group(monkeypatch):
    monkeypatch.setattr(batching, "RETURN_WAIT", 3600)
    batches = []

    def run(key, texts):
        batches.append(sorted(texts))
        return texts

    async def main():
        worker = batcher(run, batch_tokens=100)
        first = [worker.submit("greedy", [f"first {i}"]) for i in range(2)]
        worker.start()
        await asyncio.gather(*first)
        again = [worker.submit("greedy", ["again 0"])]
        await asyncio.sleep(0.2)  # alone, it would be batched now: its group waits
        again.append(worker.submit("greedy", ["again 1"]))
        await asyncio.wait_for(asyncio.gather(*again), 60)
        worker.close()

    asyncio.run(main())
    assert batches == [["first 0", "first 1"], ["again 0", "again 1"]]


def test_groups_take_turns_one_batch_each():
    batches = []

    def run(key, texts):
        batches.append(key)
        return texts

    async def main():
        worker = batcher(run, batch_tokens=10)
        futures = [worker.submit(key, ["x"] * count) for key, count in
                   (("a", 30), ("b", 20), ("c", 5))]
        worker.start()
        await asyncio.gather(*futures)
        worker.close()

    asyncio.run(main())
    assert batches == ["a", "b", "c", "a", "b", "a"]


@contextlib.contextmanager
def serving(app):
    """`app` served by uvicorn on a free loopback port, in a thread: the port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


def wait_until(condition, seconds=10):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_texts_of_clients_that_left_are_not_computed():
    app, model = fake_app()
    computed, translate = [], model.translate

    def counting(search, weights, texts):
        computed.extend(texts)
        return translate(search, weights, texts)

    model.translate = counting
    model.release.clear()
    batcher_of_app = app.state.batcher
    submitted, submit = [], batcher_of_app.submit
    batcher_of_app.submit = lambda key, texts: submitted.append(submit(key, texts)) or submitted[-1]
    with serving(app) as port:
        url = f"http://127.0.0.1:{port}"
        first = threading.Thread(target=lambda: httpx.post(
            f"{url}/translate", json={"texts": ["first"]}, timeout=60))
        first.start()
        wait_until(lambda: computed == ["first"])  # the worker is busy with it
        for client in range(3):
            body = json.dumps({"texts": [f"left {client} {i}" for i in range(300)],
                               "beam": 16}).encode()
            with socket.create_connection(("127.0.0.1", port)) as connection:
                connection.sendall(
                    b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    b"application/json\r\nContent-Length: " + str(len(body)).encode()
                    + b"\r\n\r\n" + body)
                wait_until(lambda: len(submitted) == 2 + client)
        # Each request that lost its client is cancelled while the worker is still busy.
        wait_until(lambda: all(future.cancelled() for future in submitted[1:]))
        model.release.set()
        first.join(60)
        wait_until(lambda: batcher_of_app.pending == 0)
        after = httpx.post(f"{url}/translate", json={"texts": ["after"]}).json()
    assert after["translations"][0]["text"] == "retfa"
    assert computed == ["first", "after"]


def test_what_the_server_loaded_is_frozen_out_of_the_collector_s_sight():
    """`load_for_life`: after the models load, a full collection no longer walks them
    (the random 0.7 to 2 s stalls of docs/serving.md's "Fairness and churn")."""
    import gc

    from attncli.cli.serve_command import load_for_life

    class Loaded:
        def load(self):
            self.models = {"model": [object() for _ in range(1000)]}

    registry = Loaded()
    gc.unfreeze()
    try:
        load_for_life(registry)
        assert gc.get_freeze_count() >= 1000
        loaded = registry.models["model"]
        assert all(tracked is not loaded for tracked in gc.get_objects())
    finally:
        gc.unfreeze()
