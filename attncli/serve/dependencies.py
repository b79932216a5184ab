"""What a route asks FastAPI for (`Depends`): the server's parts, and a request's body.

`create_app` keeps its parts on `app.state` (`registry`, `limits`, `batcher`,
`metrics`); a route names the ones it reads in its signature, as `Annotated` types:

    Models       the `Registry`, its models loaded (503 and `Retry-After` before)
    Loading      the `Registry`, loaded or not (`/health` says which)
    ServerLimits the server's `Limits`
    Worker       the `Batcher` whose thread runs every TensorFlow call
    Counters     the `Metrics`

`json_body(schema)` is a request's body read within the limits (`read_json`) and
validated as `schema` (`schemas.parse`), with the request schema written into the
OpenAPI document (`json_body_schema`).

The token is not a dependency: `attncli.serve.access.BearerToken` asks every request
for it before any route is found, so that a path that exists and one that does not are
refused alike (401), and `/docs` too.
"""

from typing import Annotated

from fastapi import Depends, Request

from attncli.serve import schemas
from attncli.serve.batching import Batcher
from attncli.serve.limits import Limits, RequestError
from attncli.serve.metrics import Metrics
from attncli.serve.registry import Registry
from attncli.serve.request_body import read_json


async def loading(request: Request) -> Registry:
    return request.app.state.registry


async def ready(registry: Annotated[Registry, Depends(loading)]) -> Registry:
    if not registry.ready:
        raise RequestError(503, "the models are still loading; try again in a few seconds",
                           {"Retry-After": "5"})
    return registry


async def server_limits(request: Request) -> Limits:
    return request.app.state.limits


async def worker(request: Request) -> Batcher:
    return request.app.state.batcher


async def counters(request: Request) -> Metrics:
    return request.app.state.metrics


Loading = Annotated[Registry, Depends(loading)]
Models = Annotated[Registry, Depends(ready)]
ServerLimits = Annotated[Limits, Depends(server_limits)]
Worker = Annotated[Batcher, Depends(worker)]
Counters = Annotated[Metrics, Depends(counters)]


def json_body(schema):
    """The dependency giving a request's body as a `schema` instance (422 for a body
    that is not one, in one line: `schemas.parse`)."""

    async def parsed(request: Request, limits: ServerLimits):
        return schemas.parse(schema, await read_json(request, limits))

    return Depends(parsed)


def json_body_schema(schema):
    """The OpenAPI request body of a route whose body is `json_body(schema)`."""
    written = schema.model_json_schema(ref_template="#/components/schemas/{model}")
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": written}}}}
