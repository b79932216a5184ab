"""How the application answers a request it does not serve: `{"error": "one line"}`.

`EXCEPTION_HANDLERS` turn what a route raises into that answer (`access.refusal`, the
security headers included): a `RequestError` with its own status and headers, a full
queue 503 with `Retry-After`, Starlette's own 404 and 405, a body FastAPI could not
validate 422, a client gone 400 (read by nobody), and any other exception, a failure of
the server's own, 500. `error_responses` documents them at `/docs`.
"""

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from attncli.errors import first_line
from attncli.serve import schemas
from attncli.serve.access import refusal
from attncli.serve.batching import QueueFull
from attncli.serve.limits import RequestError

RETRY_AFTER = "1"  # seconds a client refused for a full queue waits
#: The statuses of a refusal, as `/docs` lists them.
REFUSED = (400, 401, 403, 404, 413, 415, 421, 422, 503)


async def refused(request, error):
    return refusal(error.status, error.message, error.headers)


async def queue_full(request, error):
    return refusal(503, f"{error}; try again", {"Retry-After": RETRY_AFTER})


async def http_error(request, error):
    return refusal(error.status_code, str(error.detail), error.headers)


async def invalid(request, error):
    return refusal(422, "the request is not valid")


async def gone(request, error):
    return refusal(400, "the client left before its answer")  # read by nobody


async def failed(request, error):
    return refusal(500, f"the server failed: {first_line(error)}")


#: Handlers by exception class, for `FastAPI(exception_handlers=...)`.
EXCEPTION_HANDLERS = {
    RequestError: refused,
    QueueFull: queue_full,
    HTTPException: http_error,
    RequestValidationError: invalid,
    ClientDisconnect: gone,
    Exception: failed,
}


def error_responses():
    """The OpenAPI responses of a route's refusals."""
    return {status: {"model": schemas.ErrorResponse} for status in REFUSED}
