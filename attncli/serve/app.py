"""The FastAPI application of `attncli serve`: its parts, routes, refusals and middleware.

Endpoints (their schemas at `/docs`, `/openapi.json`; each in `attncli.serve.routers`):

    GET  /health     200 {"status": "ready", ...} once every model is loaded and
                     traced; 503 {"status": "loading"} before
    GET  /models     each model's name, task, tokenizer levels and decoding defaults
    POST /translate  {"texts": [...], "model"?, "beam"?, "n_best"?, "alpha"?,
                     "alignments"?, "attention"?, "token_log_probs"?, ...} ->
                     {"translations": [...]}, in order
    POST /inspect    {"text", "model"?, "beam"?, "reference"?, "words"?, "gold"?} ->
                     the sentence's attention view (over `reference` if given, with
                     its words view if asked, and the gold links in it)
    POST /step       {"text", "model"?, "beam"?, "reference"?, "attention", "layer"?,
                     "head"?, "step"} -> one attention step (vectors cut to 8
                     components)
    GET  /           the attention page: one HTML file, its stylesheet and script inline
    GET  /metrics    requests, errors, latency, queue depth and batch sizes in
                     Prometheus's text format (`attncli.serve.metrics`)

A request refused says why in one line, `{"error": "..."}`, with a 4xx status (503 and
`Retry-After` while loading or when the queue is full); a failure of the server's own
is a 500 of the same form, and the next request is served as usual
(`attncli.serve.refusals`). Who may send requests, and the headers of every answer:
`attncli.serve.access`.
"""

import asyncio
import contextlib

from fastapi import FastAPI

from attncli.serve.access import BearerToken, Guard, Hosts
from attncli.serve.batching import Batcher
from attncli.serve.metrics import Measured, Metrics
from attncli.serve.refusals import EXCEPTION_HANDLERS
from attncli.serve.routers import inspection, metrics, models, page, translation


def create_app(registry, limits, token=None, load=None, on_loaded=None, hosts=None):
    """The application serving `registry`'s models within `limits`.

    Args:
        registry: a `Registry`.
        limits: the server's `Limits`.
        token: if set, every request must carry it (see `BearerToken`).
        load: None, or a function that loads the registry's models (`registry.load`),
            run on the batcher's thread when the application starts.
        on_loaded: None, or `on_loaded(error)`, called when `load` ends (error None
            once every model is ready).
        hosts: the `Hosts` whose names a request's `Host` may give (`Guard`).
            Defaults to the loopback names, on any port (`Hosts("127.0.0.1")`).
    """
    counters = Metrics(queue_depth=lambda: batcher.pending)
    batcher = Batcher(
        measure=lambda key, requests: registry.models[key[0]].measure(key[1], requests),
        run=counters.counted(
            lambda key, texts: registry.models[key[0]].translate(key[1], key[2], texts)),
        batch_tokens=limits.batch_tokens,
        batch_wait=limits.batch_wait_ms / 1000,
        max_queue=limits.max_queue,
    )
    app = FastAPI(
        title="attncli serve",
        summary="Translations and attention from attncli models.",
        lifespan=_lifespan(batcher, load, on_loaded),
        exception_handlers=EXCEPTION_HANDLERS,
    )
    # What `attncli.serve.dependencies` gives the routes.
    app.state.registry = registry
    app.state.limits = limits
    app.state.batcher = batcher
    app.state.metrics = counters
    for router in (models, translation, inspection, page, metrics):
        app.include_router(router.router)
    if token is not None:
        app.add_middleware(BearerToken, token=token)
    # before the token: a foreign Host is told so
    app.add_middleware(Guard, hosts=Hosts("127.0.0.1") if hosts is None else hosts)
    app.add_middleware(Measured, metrics=counters)  # the outermost: every answer is counted
    return app


def _lifespan(batcher, load, on_loaded):
    """The application's lifespan: the batcher's thread runs from its start (loading the
    models first, with `load`, if given) to its end."""

    @contextlib.asynccontextmanager
    async def lifespan(app):
        batcher.start()
        if load is not None:
            loading = batcher.call(load)
            if on_loaded is not None:
                loading.add_done_callback(lambda done: on_loaded(
                    None if done.cancelled() else done.exception()))
        yield
        # A stop while the models load does not wait for them: loading writes nothing,
        # and importing TensorFlow and tracing cannot be interrupted (minutes on a busy
        # machine). The command ends the process (`attncli.cli.serve_command`).
        loaded = load is None or loading.done()
        await asyncio.to_thread(batcher.close, wait=loaded)

    return lifespan
