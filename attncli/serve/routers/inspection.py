"""`POST /inspect` and `POST /step`: the attention of one sentence, from the worker.

`/inspect` gives a sentence's best translation, or its given `reference` (forced
decoding), with every attention of the model over it, its words view if asked and the
gold links in it; `/step` one step of one attention, layer and head (query, keys,
values, scores, weights, context; vectors cut to 8 components).
"""

from typing import Annotated

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from attncli.errors import AttncliError
from attncli.serve import schemas
from attncli.serve.dependencies import Models, ServerLimits, Worker, json_body, json_body_schema
from attncli.serve.limits import RequestError
from attncli.serve.refusals import error_responses
from attncli.serve.request_body import text_line
from attncli.serve.served_model import TextTooLong

router = APIRouter()


@router.post("/inspect", openapi_extra=json_body_schema(schemas.InspectRequest),
             responses=error_responses())
async def inspect(registry: Models,
                  body: Annotated[schemas.InspectRequest, json_body(schemas.InspectRequest)],
                  limits: ServerLimits, batcher: Worker):
    """A sentence's best translation, or its given reference, and every attention
    of the model over it; with `words`, its words view."""
    model = registry.get(body.model)
    decoding = model.decoding(body.beam)
    view, gold = await _view_of(body, model, decoding, limits, batcher)
    return JSONResponse({**view.to_dict(bool(body.words), gold), "model": model.name,
                         "search": decoding.to_dict()})


@router.post("/step", openapi_extra=json_body_schema(schemas.StepRequest),
             responses=error_responses())
async def step(registry: Models,
               body: Annotated[schemas.StepRequest, json_body(schemas.StepRequest)],
               limits: ServerLimits, batcher: Worker):
    """One attention step of a sentence's best translation: query, keys, values,
    scores, weights, context."""
    model = registry.get(body.model)
    decoding = model.decoding(body.beam)
    record, _ = await _view_of(body, model, decoding, limits, batcher,
                               (body.attention, body.layer, body.head, body.step))
    return JSONResponse(record)


async def _view_of(body, model, decoding, limits, batcher, step=None):
    """The attention view of `body.text` (over `body.reference` if given), or one of its
    steps, from the worker; `(view or step, gold links or None)`."""
    text = text_line(body.text, "text", limits)
    if not text.strip():
        raise RequestError(422, "text: it is empty; give a sentence")
    reference = _reference(body, limits)
    gold = _gold(body, reference)

    def work():
        view = model.inspect(text, decoding, reference)
        if gold is not None:
            view.check_gold(gold)
        return view if step is None else view.step(*step).to_dict(width=8)

    try:
        return await batcher.call(work), gold
    except TextTooLong as error:
        raise error.refusal("text") from None
    except AttncliError as error:
        raise RequestError(422, str(error)) from None


def _reference(body, limits):
    """The request's `reference` (None without one), checked as `text` is."""
    if body.reference is None:
        return None
    reference = text_line(body.reference, "reference", limits)
    if not reference.strip():
        raise RequestError(422, "reference: it is empty; give a translation, or leave the "
                           "field out")
    if body.beam is not None:
        raise RequestError(422, "beam: a reference is not searched for; leave beam out")
    return reference


def _gold(body, reference):
    """The request's gold links (`Gold`, None without them), read from the talp line."""
    from attncli.links import LinkError, parse_talp

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
