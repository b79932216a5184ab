"""The HTTP connections of `attncli serve`: how many, how large a request's head, and
how long a client may take to send a request.

uvicorn's httptools protocol bounds none of these: a client that never finishes its
headers, or trickles its body, holds its connection for ever; a header of 160 MiB is
read whole; and a server asked to stop waits for such a client. `LimitedHttp` is that
protocol with limits (uvicorn calls it as it calls its own, for each connection):

- **Connections**: past `max_connections` open at once, a new one is answered 503
  (with `Retry-After`) and closed at once, before anything of it is read.
- **Head size**: a request line longer than `MAX_URL_BYTES` is answered 414, a head
  (request line and headers) larger than `MAX_HEAD_BYTES` 431, both as soon as the
  bytes read pass the limit (one read of the socket past it at most), then closed.
- **Timeouts**: a request's head must be whole `header_timeout` seconds after its
  first byte (after the connection opened, for its first request); its body
  `body_timeout` seconds after its head. Past either, the client is answered 408
  (unless its answer has begun) and its connection closed: the application reading
  the body sees the client leave. Between requests, uvicorn's keep-alive timeout
  closes an idle connection.
- **Stopping**: when the server stops, a connection still sending its request is
  closed, as uvicorn closes an idle one; a request whose body was read is answered
  first (`serve_command` bounds that wait).

Every answer of its own is `{"error": "..."}` with the security headers of
`attncli.serve.access`, as the application's refusals are.
"""

import json

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from attncli.serve.access import SECURITY_HEADERS

#: The longest request line's target (path and query), in bytes: 414 past it.
MAX_URL_BYTES = 8 * 1024
#: The largest request head (request line and headers), in bytes: 431 past it.
MAX_HEAD_BYTES = 64 * 1024


class LimitedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol within a server's connection limits.

    Args:
        limits: the server's `Limits` (`max_connections`, `header_timeout`,
            `body_timeout`).
        **options: what uvicorn gives its protocol (`config`, `server_state`, ...).
    """

    def __init__(self, limits, **options):
        super().__init__(**options)
        self.limits = limits
        self._timer = None  # the call that ends the head's or the body's time
        self._head_bytes = None  # bytes read of a head not yet whole; None between heads
        self._refused = False

    def connection_made(self, transport):
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(503, f"more than {self.limits.max_connections} connections are "
                         "open (--max-connections); try again", {"Retry-After": "1"})
            return
        self._time(self.limits.header_timeout, "its headers")

    def connection_lost(self, exc):
        self._time(None)
        super().connection_lost(exc)

    def data_received(self, data):
        if self._refused:
            return
        super().data_received(data)
        if self._head_bytes is None or self._refused or self.transport.is_closing():
            return
        self._head_bytes += len(data)
        if len(self.url) > MAX_URL_BYTES:
            self._refuse(414, f"the request's path and query pass {MAX_URL_BYTES} bytes")
        elif self._head_bytes > MAX_HEAD_BYTES:
            self._refuse(431, f"the request's headers pass {MAX_HEAD_BYTES} bytes")

    def on_message_begin(self):
        if self._refused:
            return
        super().on_message_begin()
        self._head_bytes = 0
        if self._timer is None:  # a later request on a kept connection
            self._time(self.limits.header_timeout, "its headers")

    def on_headers_complete(self):
        self._head_bytes = None
        head = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if len(self.url) > MAX_URL_BYTES:
            self._refuse(414, f"the request's path and query pass {MAX_URL_BYTES} bytes")
        elif head > MAX_HEAD_BYTES:
            self._refuse(431, f"the request's headers pass {MAX_HEAD_BYTES} bytes")
        else:
            self._time(self.limits.body_timeout, "its body")
            super().on_headers_complete()

    def on_body(self, body):
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self):
        if not self._refused:
            self._time(None)
            super().on_message_complete()

    def shutdown(self):
        if self.cycle is not None and not self.cycle.response_complete and self.cycle.more_body:
            self.transport.close()  # still sending its body
        else:
            super().shutdown()  # closes it unless a request is being answered

    def _time(self, seconds, what=None):
        """Ends the connection `seconds` from now unless called again; None: never."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if seconds is not None:
            self._timer = self.loop.call_later(seconds, self._expire, seconds, what)

    def _expire(self, seconds, what):
        self._timer = None
        if self._head_bytes is None and self.cycle is not None and self.cycle.response_started:
            self.transport.close()  # answered already (before reading the whole body)
        else:
            self._refuse(408, f"the request did not send {what} within {seconds:g} s")

    def _refuse(self, status, message, headers=None):
        """Answers `status` with `{"error": message}` and closes the connection."""
        self._refused = True
        self._time(None)
        if self.transport.is_closing():
            return
        body = json.dumps({"error": message}).encode("utf-8")
        fields = {**SECURITY_HEADERS, **(headers or {}), "Content-Type": "application/json",
                  "Content-Length": str(len(body)), "Connection": "close"}
        self.transport.write(STATUS_LINE[status] + b"".join(
            f"{name}: {value}\r\n".encode("latin-1") for name, value in fields.items())
            + b"\r\n" + body)
        self.transport.close()
