"""What a request may ask of the server, and how a refusal is said.

Every limit is a flag of `attncli serve` with the default written here once. A request
past a limit is refused with a 4xx status and `{"error": "one line"}`; a full queue
with 503 and `Retry-After`.
"""

import dataclasses

#: The longest a batch may wait for more texts, in milliseconds: on a quiet server every
#: request waits that long for its answer.
MAX_BATCH_WAIT_MS = 1000
#: The longest `header_timeout` and `body_timeout`, in seconds.
MAX_TIMEOUT = 3600


@dataclasses.dataclass(frozen=True)
class Limits:
    """The limits of one server.

    Args:
        max_body_bytes: the largest request body, in bytes (413 past it).
            Defaults to 1 MiB.
        max_texts: texts in one `/translate` request (413 past it). Defaults to 1000.
        max_chars: characters in one text (413 past it). Defaults to 1000.
        max_output_tokens: the longest translation a text may ask for: a text whose
            search may emit more tokens (`ceil(max_length_ratio * source tokens) +
            max_length_offset`, the run's decoding settings) is refused (413).
            Defaults to 512.
        max_beam: the largest `beam` a request may ask for (422 past it). Defaults to 16.
        max_queue: texts waiting or being translated, all requests together; a
            request that would pass it is refused with 503 and `Retry-After`.
            Defaults to 4096.
        batch_tokens: a batch's budget, in source tokens times the beam size: the
            batcher stops adding texts to a batch past it (one text alone may pass
            it). Defaults to 4096.
        batch_wait_ms: how long a batch waits for more texts after its first
            arrived, in milliseconds, at most `MAX_BATCH_WAIT_MS`. Defaults to 3.
        max_connections: connections open at once; past it a new one is answered
            503 and closed (`attncli.serve.connections`). Defaults to 512.
        header_timeout: seconds a request's head (request line and headers) may
            take, from its first byte (from the connection, for the first request),
            at most `MAX_TIMEOUT`; 408 past it. Defaults to 10.
        body_timeout: seconds a request's body may take after its head, at most
            `MAX_TIMEOUT`; 408 past it. Defaults to 30 (a body of 1 MiB in 30 s is
            35 kB/s).
    """

    max_body_bytes: int = 1 << 20
    max_texts: int = 1000
    max_chars: int = 1000
    max_output_tokens: int = 512
    max_beam: int = 16
    max_queue: int = 4096
    batch_tokens: int = 4096
    batch_wait_ms: float = 3.0
    max_connections: int = 512
    header_timeout: float = 10.0
    body_timeout: float = 30.0

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value, least = getattr(self, field.name), 0 if field.name == "batch_wait_ms" else 1
            if not value >= least:
                flag = "--" + field.name.replace("_", "-")
                raise ValueError(f"{flag} must be >= {least}. Received: {flag}={value}")
        if not self.batch_wait_ms <= MAX_BATCH_WAIT_MS:
            raise ValueError(f"--batch-wait-ms must be in [0, {MAX_BATCH_WAIT_MS}] "
                             f"(milliseconds). Received: --batch-wait-ms={self.batch_wait_ms}")
        for name in ("header_timeout", "body_timeout"):
            if not getattr(self, name) <= MAX_TIMEOUT:
                flag = "--" + name.replace("_", "-")
                raise ValueError(f"{flag} must be in [1, {MAX_TIMEOUT}] (seconds). "
                                 f"Received: {flag}={getattr(self, name)}")
        if self.max_texts > self.max_queue:
            raise ValueError(
                f"--max-texts ({self.max_texts}) is larger than --max-queue "
                f"({self.max_queue}): a request that large could never be queued"
            )


class RequestError(Exception):
    """A request refused: its HTTP status, the one-line message, and extra headers."""

    def __init__(self, status, message, headers=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
