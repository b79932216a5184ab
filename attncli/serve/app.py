"""The FastAPI application of `attncli serve`.

Endpoints (their schemas at `/docs`, `/openapi.json`):

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
is a 500 of the same form, and the next request is served as usual. Who may send
requests, and the headers of every answer: `attncli.serve.access`.

Each text is translated as `attncli translate` translates a line given as an argument
(a newline inside a text reads as a space; an empty or whitespace text gets an empty
translation and a null score), in batches the `Batcher` merges across requests.
"""

import asyncio
import contextlib
import itertools
import json
import math
import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from attncli.errors import AttncliError, first_line, shown
from attncli.serve import schemas
from attncli.serve.access import BearerToken, Guard, Hosts, refusal
from attncli.serve.batching import Batcher, QueueFull
from attncli.serve.limits import RequestError
from attncli.serve.metrics import Measured, Metrics
from attncli.serve.page import content_security_policy, page_html
from attncli.serve.registry import TextTooLong

RETRY_AFTER = "1"  # seconds a client refused for a full queue waits
#: How deep arrays and objects may nest in a body; the API's bodies nest two deep.
MAX_DEPTH = 32
#: A JSON string, escapes and all (RFC 8259 section 7).
JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


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
    metrics = Metrics(queue_depth=lambda: batcher.pending)
    batcher = Batcher(
        measure=lambda key, requests: registry.models[key[0]].measure(key[1], requests),
        run=metrics.counted(
            lambda key, texts: registry.models[key[0]].translate(key[1], key[2], texts)),
        batch_tokens=limits.batch_tokens,
        batch_wait=limits.batch_wait_ms / 1000,
        max_queue=limits.max_queue,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app):
        batcher.start()
        if load is not None:
            loading = batcher.call(load)
            if on_loaded is not None:
                loading.add_done_callback(lambda done: on_loaded(
                    None if done.cancelled() else done.exception()))
        yield
        await asyncio.to_thread(batcher.close)

    app = FastAPI(
        title="attncli serve",
        summary="Translations and attention from attncli models.",
        lifespan=lifespan,
    )
    app.state.batcher = batcher

    @app.exception_handler(RequestError)
    async def refused(request, error):
        return refusal(error.status, error.message, error.headers)

    @app.exception_handler(QueueFull)
    async def queue_full(request, error):
        return refusal(503, f"{error}; try again", {"Retry-After": RETRY_AFTER})

    @app.exception_handler(HTTPException)
    async def http_error(request, error):
        return refusal(error.status_code, str(error.detail), error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, error):
        return refusal(422, "the request is not valid")

    @app.exception_handler(ClientDisconnect)
    async def gone(request, error):
        return refusal(400, "the client left before its answer")  # read by nobody

    @app.exception_handler(Exception)
    async def failed(request, error):
        return refusal(500, f"the server failed: {first_line(error)}")

    def ready():
        if not registry.ready:
            raise RequestError(503, "the models are still loading; try again in a few "
                               "seconds", {"Retry-After": "5"})

    @app.get("/health")
    async def health():
        """200 once every model is loaded and its searches traced; 503 before."""
        if not registry.ready:
            return JSONResponse({"status": "loading"}, 503, {"Retry-After": "5"})
        return {"status": "ready", "models": list(registry.models),
                "queued": batcher.pending}

    @app.get("/models", response_model=schemas.ModelsResponse)
    async def models():
        """Each model's name, task, tokenizer levels and decoding defaults."""
        ready()
        return JSONResponse({
            "default": registry.default,
            "models": [model.describe() for model in registry.models.values()],
        })

    @app.post("/translate", openapi_extra=_body(schemas.TranslateRequest),
              responses=_responses(schemas.TranslateResponse))
    async def translate(request: Request):
        """Translate texts; one object per text, in order (see the request schema)."""
        ready()
        body = schemas.parse(schemas.TranslateRequest, await _read_json(request, limits))
        model = registry.get(body.model)
        search = model.decoding(body.beam, body.alpha, body.n_best, body.prefix, body.sampling,
                                body.temperature, body.seed, body.token_log_probs)
        if len(body.texts) > limits.max_texts:
            raise RequestError(413, f"{len(body.texts)} texts in one request; at most "
                               f"{limits.max_texts} (--max-texts)")
        lines = [_line(text, f"texts[{index}]", limits) for index, text in
                 enumerate(body.texts)]
        filled = [index for index, line in enumerate(lines) if line.strip()]
        weights = body.alignments or body.attention
        results = await _submit(request, batcher, (model.name, search, weights),
                                [lines[index] for index in filled], filled)
        output = [{"text": "", "score": None} for _ in lines]
        for index, result in zip(filled, results):
            output[index] = _translated(result, model, body)
        if body.n_best is not None:
            for index in set(range(len(lines))) - set(filled):
                output[index]["hypotheses"] = []
        return JSONResponse({"translations": output})

    async def view_of(body, model, search, step=None):
        """The attention view of `body.text` (over `body.reference` if given), or one
        of its steps, from the worker; `(view or step, gold links or None)`."""
        text = _line(body.text, "text", limits)
        if not text.strip():
            raise RequestError(422, "text: it is empty; give a sentence")
        reference = _reference(body, limits)
        gold = _gold(body, reference)

        def work():
            view = model.inspect(text, search, reference)
            if gold is not None:
                view.check_gold(gold)
            return view if step is None else view.step(*step).to_dict(width=8)

        try:
            return await batcher.call(work), gold
        except TextTooLong as error:
            raise _too_long(error, "text") from None
        except AttncliError as error:
            raise RequestError(422, str(error)) from None

    @app.post("/inspect", openapi_extra=_body(schemas.InspectRequest),
              responses=_responses(None))
    async def inspect(request: Request):
        """A sentence's best translation, or its given reference, and every attention
        of the model over it; with `words`, its words view."""
        ready()
        body = schemas.parse(schemas.InspectRequest, await _read_json(request, limits))
        model = registry.get(body.model)
        search = model.search(body.beam)
        view, gold = await view_of(body, model, search)
        return JSONResponse({**view.to_dict(bool(body.words), gold), "model": model.name,
                             "search": search.to_dict()})

    @app.post("/step", openapi_extra=_body(schemas.StepRequest), responses=_responses(None))
    async def step(request: Request):
        """One attention step of a sentence's best translation: query, keys, values,
        scores, weights, context."""
        ready()
        body = schemas.parse(schemas.StepRequest, await _read_json(request, limits))
        model = registry.get(body.model)
        search = model.search(body.beam)
        record, _ = await view_of(body, model, search,
                                  (body.attention, body.layer, body.head, body.step))
        return JSONResponse(record)

    page_text = page_html()  # built once: its files do not change while it serves
    page_policy = {"Content-Security-Policy": content_security_policy(page_text)}

    @app.get("/", response_class=HTMLResponse)
    async def page():
        """The attention page."""
        return HTMLResponse(page_text, headers=page_policy)

    @app.get("/metrics", response_class=Response)
    async def scrape(request: Request):
        """The server's metrics in Prometheus's text format."""
        body, content_type = metrics.text(request.headers.get("accept"))
        return Response(body, headers={"Content-Type": content_type})

    if token is not None:
        app.add_middleware(BearerToken, token=token)
    # before the token: a foreign Host is told so
    app.add_middleware(Guard, hosts=Hosts("127.0.0.1") if hosts is None else hosts)
    app.add_middleware(Measured, metrics=metrics)  # the outermost: every answer is counted
    return app


async def _submit(request, batcher, key, texts, positions):
    """The batcher's results of `texts`, a text too long turned into a `RequestError`
    (a full queue is answered by the application's handler of `QueueFull`).

    When the client leaves first (or the request is cancelled), the batcher's future is
    cancelled, so its texts not yet batched are dropped, and `ClientDisconnect` raised.
    """
    results = batcher.submit(key, texts)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({results, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not results.done():
            results.cancel()
    if results.cancelled():
        raise ClientDisconnect()
    try:
        return results.result()
    except TextTooLong as error:
        raise _too_long(error, f"texts[{positions[error.position]}]") from None


async def _disconnected(request):
    """Returns when the client of `request`, whose body was read, disconnects."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _reference(body, limits):
    """The request's `reference` (None without one), checked as `text` is."""
    if body.reference is None:
        return None
    reference = _line(body.reference, "reference", limits)
    if not reference.strip():
        raise RequestError(422, "reference: it is empty; give a translation, or leave the "
                           "field out")
    if body.beam is not None:
        raise RequestError(422, "beam: a reference is not searched for; leave beam out")
    return reference


def _gold(body, reference):
    """The request's gold links (`Gold`, None without them), read from the talp line."""
    from attncli.alignment.links import LinkError, parse_talp

    if body.gold is None:
        return None
    if reference is None:
        raise RequestError(422, "gold: gold links join the words of a given translation; "
                           "add \"reference\"")
    if body.words is False:
        raise RequestError(422, "gold: gold links are shown on the words view; leave "
                           "\"words\" out or set it true")
    try:
        return parse_talp(body.gold, where="gold")
    except LinkError as error:
        raise RequestError(422, str(error)) from None


def _too_long(error, where):
    return RequestError(413, f"{where}: {error.why}")


def _line(text, where, limits):
    """`text` as `attncli translate` reads an argument (newlines as spaces), checked."""
    if len(text) > limits.max_chars:
        raise RequestError(413, f"{where}: {len(text)} characters; at most "
                           f"{limits.max_chars} (--max-chars)")
    return " ".join(text.split("\n"))


def _translated(result, model, body):
    """The response object of one text's `Translation`."""
    from attncli.search.alignments import align_translation

    alignments = None
    if body.alignments:
        result, alignments = align_translation(result, *model.levels)
    hypotheses = [_hypothesis(hypothesis, alignments[rank] if alignments else None, body)
                  for rank, hypothesis in enumerate(result.hypotheses)]
    output = dict(hypotheses[0])
    if body.attention:
        output["source_tokens"] = list(result.source_tokens)
    if alignments:
        output["source_words"] = [word.text for word in alignments[0].source_words]
    if body.n_best is not None:
        output["hypotheses"] = hypotheses
    return output


def _hypothesis(hypothesis, alignment, body):
    entry = {"text": hypothesis.text, "score": _finite(hypothesis.score)}
    if alignment is not None:
        entry["words"] = [word.text for word in alignment.target_words]
        entry["alignment"] = alignment.pharaoh()
    if body.attention or body.token_log_probs:
        entry["tokens"] = list(hypothesis.tokens)
    if body.attention:
        entry["weights"] = hypothesis.weights.astype(float).round(5).tolist()
    if body.token_log_probs:
        entry["token_log_probs"] = [_finite(value) for value in hypothesis.token_log_probs]
    return entry


def _finite(value):
    """`value` as a float, None when it is not finite (JSON has no -inf)."""
    value = float(value)
    return value if math.isfinite(value) else None


async def _read_json(request, limits):
    """The request's body as JSON, within `max_body_bytes` and `MAX_DEPTH`; sent as
    `application/json` (415 otherwise: see `attncli.serve.access`)."""
    given = request.headers.get("content-type", "")
    if given.partition(";")[0].strip().lower() != "application/json":
        sent = f"not {shown(given, 60)}" if given else "none was given"
        raise RequestError(415, "send the body as JSON with 'Content-Type: "
                           f"application/json' ({sent})")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise RequestError(413, f"the body has {declared} bytes; at most "
                           f"{limits.max_body_bytes} (--max-body-bytes)")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limits.max_body_bytes:
            raise RequestError(413, f"the body has more than {limits.max_body_bytes} bytes "
                               "(--max-body-bytes)")
    try:
        # A byte order mark before the JSON text is ignored, as RFC 8259 (8.1) allows.
        text = body.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        raise RequestError(400, f"the body is not UTF-8 (byte {error.start})") from None
    depth = _depth(text)
    if depth > MAX_DEPTH:
        raise RequestError(400, f"the body nests arrays and objects {depth} deep; at most "
                           f"{MAX_DEPTH}")
    try:
        return json.loads(text)
    except ValueError as error:
        raise RequestError(400, f"the body is not JSON: {first_line(error)}") from None


def _depth(text):
    """How deep arrays and objects nest in the JSON `text`, counted before it is parsed:
    `json.loads` recurses once a level, and 1,000 levels pass Python's stack."""
    brackets = re.sub(r"[^\[\]{}]+", "", JSON_STRING.sub("", text))
    return max(itertools.accumulate(1 if bracket in "[{" else -1 for bracket in brackets),
               default=0)


def _body(model):
    """The OpenAPI request body of a handler that parses `model` itself."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": schema}}}}


def _responses(model):
    error = {"model": schemas.ErrorResponse}
    answers = {status: error for status in (400, 401, 403, 404, 413, 415, 421, 422, 503)}
    if model is not None:
        answers[200] = {"model": model}
    return answers
