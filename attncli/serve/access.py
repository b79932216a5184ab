"""Who may use a server, and what every answer tells the browser.

A server on loopback is still reachable by every page the user's browser opens: a page
may send it requests (a form, `fetch`), frame its page, or, with a domain of its own
whose name resolves to 127.0.0.1 (DNS rebinding), read its answers as if they were its
own. `Guard` closes those ways:

- **Host**: a request is served only if its `Host` header names the server: `localhost`,
  a loopback address, the address it listens on, a name added with `--allow-host`, and,
  when it listens on every interface (`0.0.0.0`, `::`), any IP address (an address,
  unlike a name, cannot be made to point at another machine). Else 421 (400 without a
  usable `Host`).
- **Origin**: a request that changes state (every method but GET, HEAD and OPTIONS)
  carrying an `Origin` is served only from the server's own origin (`Origin` equal to
  `Host`: another port of 127.0.0.1 is another origin) or from a name added with
  `--allow-host`. Else 403. Clients that are not browsers send no `Origin`.
- **Headers**: every answer forbids framing (`X-Frame-Options: DENY`, CSP
  `frame-ancestors 'none'`), sniffing (`nosniff`) and referrers; the page sets its own
  stricter policy (`page.content_security_policy`).

The JSON routes take `Content-Type: application/json` only (415 otherwise, in the
application): a page can send that type to another origin only after a CORS preflight,
which this server never grants, so no cross-site request reaches a search.

`BearerToken` asks every request for the `--token`.
"""

import hmac
import ipaddress
from urllib.parse import unquote, urlsplit

from starlette.responses import JSONResponse

from attncli.errors import shown

TOKEN_COOKIE = "attncli_token"
#: Sent with every answer; an answer that sets its own `Content-Security-Policy` keeps it.
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
#: Methods that only read: no `Origin` check.
READING = {"GET", "HEAD", "OPTIONS"}


def refusal(status, message, headers=None):
    """The answer refusing a request: `{"error": message}`, `status`, the security
    headers and `headers`."""
    return JSONResponse({"error": message}, status, {**SECURITY_HEADERS, **(headers or {})})


def host_name(value):
    """The name or address of a `Host` header value (`NAME`, `NAME:PORT`, `[V6]:PORT`),
    lower-cased; None when it holds none."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, port = value[1:].partition("]")
        if not bracket or (port and not (port[:1] == ":" and port[1:].isdigit())):
            return None
        return name or None
    name, colon, port = value.partition(":")
    if colon and not port.isdigit():
        return None
    return name or None


def _address(name):
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class Hosts:
    """The names a request's `Host` may give, and the origins whose pages may post.

    Args:
        listening: the address the server listens on (`--host`).
        added: names added with `--allow-host`: their `Host` and their pages' `Origin`
            are allowed.
        bound: the address the socket was bound to, which the server prints as its URL
            (`--host myhost.lan` listens on the address the name resolves to).
    """

    def __init__(self, listening, added=(), bound=None):
        listening = listening.strip("[]").lower()
        address = _address(listening)
        self.any_address = address is not None and address.is_unspecified
        self.added = {name.lower() for name in added}
        self.names = {"localhost", *self.added}
        if not self.any_address:
            self.names.add(listening)
            if bound is not None:
                self.names.add(bound.partition("%")[0].lower())

    def allows(self, name):
        """Whether `name` (from `host_name`) names this server."""
        address = _address(name)
        if address is not None and (address.is_loopback or self.any_address):
            return True
        return name in self.names or (address is not None and str(address) in self.names)


class Guard:
    """ASGI middleware: the `Host` and `Origin` checks, and the security headers on
    every answer (see the module's description).

    Args:
        app: the ASGI application guarded.
        hosts: the `Hosts` served, or None to serve any `Host` (an application made in
            a test; `attncli serve` always gives them).
    """

    def __init__(self, app, hosts):
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        send = _securing(send)
        problem = self._problem(scope)
        if problem is not None:
            return await refusal(*problem)(scope, receive, send)
        await self.app(scope, receive, send)

    def _problem(self, scope):
        """`(status, message)` of a request to refuse, else None."""
        headers = {}
        for name, value in scope["headers"]:
            headers.setdefault(name, value.decode("latin-1"))
        given = headers.get(b"host", "")
        name = host_name(given)
        if self.hosts is not None:
            if name is None:
                return 400, f"the Host header {shown(given, 60)} names no host"
            if not self.hosts.allows(name):
                return 421, (f"this server does not answer to the name {shown(name, 60)}; "
                             "to serve it, start it with --allow-host NAME")
        origin = headers.get(b"origin")
        if origin is None or scope["method"] in READING:
            return None
        try:
            parts = urlsplit(origin.strip().lower())
        except ValueError:  # a bracket not closed
            parts = urlsplit("")
        if parts.netloc and (parts.netloc == given.strip().lower()
                             or (self.hosts is not None and parts.hostname in self.hosts.added)):
            return None
        return 403, (f"a page of another origin ({shown(origin, 60)}) may not use this "
                     "server; open its own page, or start it with --allow-host NAME")


def _securing(send):
    """`send` adding `SECURITY_HEADERS` an answer does not set itself."""

    async def sending(message):
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            present = {name.lower() for name, _ in headers}
            headers += [(name.lower().encode("latin-1"), value.encode("latin-1"))
                        for name, value in SECURITY_HEADERS.items()
                        if name.lower().encode("latin-1") not in present]
            message = {**message, "headers": headers}
        await send(message)

    return sending


def cookie_value(header, name):
    """The value of cookie `name` in a `Cookie` header, read as browsers write it
    (`a=1; b=2`, RFC 6265 section 5.4): pairs split at `;`, each at its first `=`.
    Other cookies' values may hold spaces, `=`, `+` or quotes; none stops the reading.
    None when absent."""
    for pair in header.split(";"):
        key, equals, value = pair.partition("=")
        if equals and key.strip() == name:
            return value.strip()
    return None


def query_value(query, name):
    """The value of `name` in a URL's query string, percent-decoded; a `+` stays a `+`
    (a token may hold one, and a user pastes the token as it is)."""
    for pair in query.split("&"):
        key, equals, value = pair.partition("=")
        if equals and unquote(key) == name:
            return unquote(value)
    return None


class BearerToken:
    """ASGI middleware: every request needs `Authorization: Bearer TOKEN` (401 else).

    For a browser, which cannot add a header when it opens a page, `GET /?token=TOKEN`
    is accepted too: its answer sets the token as an HTTP-only, same-site cookie, which
    the page's own requests then carry and which is accepted as the header is (the
    page then takes the token out of the address bar).
    """

    def __init__(self, app, token):
        self.app = app
        self.token = token.encode("utf-8")

    def _matches(self, given):
        return given is not None and hmac.compare_digest(given.encode("utf-8"), self.token)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {name: value.decode("latin-1") for name, value in scope["headers"]}
        scheme, _, given = headers.get(b"authorization", "").partition(" ")
        from_cookie = cookie_value(headers.get(b"cookie", ""), TOKEN_COOKIE)
        if (scheme.lower() == "bearer" and self._matches(given.strip())) or \
                self._matches(from_cookie):
            return await self.app(scope, receive, send)
        if scope["path"] == "/" and scope["method"] == "GET":
            query = query_value(scope["query_string"].decode("latin-1"), "token")
            if self._matches(query):
                return await self.app(scope, receive, _setting_cookie(send, self.token))
        response = refusal(401, "this server needs its token: send the header "
                           "'Authorization: Bearer TOKEN'", {"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)


def _setting_cookie(send, token):
    cookie = (f"{TOKEN_COOKIE}={token.decode('utf-8')}; HttpOnly; SameSite=Strict; "
              "Path=/").encode("latin-1")

    async def sending(message):
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []),
                                              (b"set-cookie", cookie)]}
        await send(message)

    return sending
