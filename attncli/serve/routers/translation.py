"""`POST /translate`: texts translated in the batches the `Batcher` merges across requests.

Each text is translated as `attncli translate` translates a line given as an argument
(a newline inside a text reads as a space; an empty or whitespace text gets an empty
translation and a null score), and the answer holds one object per text, in order.
"""

import asyncio
import math
from typing import Annotated

from fastapi import APIRouter, Request
from starlette.requests import ClientDisconnect

from attncli.serve import schemas
from attncli.serve.dependencies import Models, ServerLimits, Worker, json_body, json_body_schema
from attncli.serve.limits import RequestError
from attncli.serve.refusals import error_responses
from attncli.serve.request_body import text_line
from attncli.serve.served_model import TextTooLong

router = APIRouter()


@router.post("/translate", openapi_extra=json_body_schema(schemas.TranslateRequest),
             response_model=schemas.TranslateResponse, response_model_exclude_unset=True,
             responses=error_responses())
async def translate(
    request: Request, registry: Models,
    body: Annotated[schemas.TranslateRequest, json_body(schemas.TranslateRequest)],
    limits: ServerLimits, batcher: Worker,
):
    """Translate texts; one object per text, in order (see the request schema)."""
    model = registry.get(body.model)
    search = model.decoding(body.beam, body.alpha, body.n_best, body.prefix, body.sampling,
                            body.temperature, body.seed, body.token_log_probs)
    if len(body.texts) > limits.max_texts:
        raise RequestError(413, f"{len(body.texts)} texts in one request; at most "
                           f"{limits.max_texts} (--max-texts)")
    lines = [text_line(text, f"texts[{index}]", limits) for index, text in
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
    return {"translations": output}


async def _submit(request, batcher, key, texts, positions):
    """The batcher's results of `texts`, a text too long turned into a `RequestError`
    (a full queue is answered by the handler of `QueueFull`, `attncli.serve.refusals`).

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
        raise error.refusal(f"texts[{positions[error.position]}]") from None


async def _disconnected(request):
    """Returns when the client of `request`, whose body was read, disconnects."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


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
