"""A request's JSON body, read within the server's limits, and its texts as lines.

`read_json` takes a body sent as `application/json` only (415 otherwise: see
`attncli.serve.access`), of at most `max_body_bytes` (413), in UTF-8 (400), nesting
arrays and objects at most `MAX_DEPTH` deep (400), and JSON (400). `text_line` reads a
text as `attncli translate` reads a line given as an argument (a newline reads as a
space), of at most `max_chars` characters (413).
"""

import itertools
import json
import re

from attncli.errors import first_line, shown
from attncli.serve.limits import RequestError

#: How deep arrays and objects may nest in a body; the API's bodies nest two deep.
MAX_DEPTH = 32
#: A JSON string, escapes and all (RFC 8259 section 7).
JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


async def read_json(request, limits):
    """The request's body as JSON, within `max_body_bytes` and `MAX_DEPTH`; sent as
    `application/json` (415 otherwise)."""
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
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise RequestError(400, f"the body nests arrays and objects {depth} deep; at most "
                           f"{MAX_DEPTH}")
    try:
        return json.loads(text)
    except ValueError as error:
        raise RequestError(400, f"the body is not JSON: {first_line(error)}") from None


def nesting_depth(text):
    """How deep arrays and objects nest in the JSON `text`, counted before it is parsed:
    `json.loads` recurses once a level, and 1,000 levels pass Python's stack."""
    brackets = re.sub(r"[^\[\]{}]+", "", JSON_STRING.sub("", text))
    return max(itertools.accumulate(1 if bracket in "[{" else -1 for bracket in brackets),
               default=0)


def text_line(text, where, limits):
    """`text` as `attncli translate` reads an argument (newlines as spaces), checked
    against `max_chars` (413, naming the field `where`)."""
    if len(text) > limits.max_chars:
        raise RequestError(413, f"{where}: {len(text)} characters; at most "
                           f"{limits.max_chars} (--max-chars)")
    return " ".join(text.split("\n"))
