"""Who may use a server, and what every answer tells the browser.

A server on loopback is still reachable by every page the user's browser opens: a page
may send it requests (a form, `fetch`), frame its page, or, with a domain of its own
whose name resolves to 127.0.0.1 (DNS rebinding), read its answers as if they were its
own. `Guard` closes those ways:

- **Host**: a request is served only if its `Host` header names the server. Its own
  names: `localhost`, a loopback address, the address it listens on and, when it listens
  on every interface (`0.0.0.0`, `::`), any IP address (an address, unlike a name,
  cannot be made to point at another machine), each with the port it listens on, as a
  browser writes it (a request for another port went through a tunnel or a proxy).
  Names added with `--allow-host`: `NAME` on any port, `NAME:PORT` on that port only. A
  `Host` without a port names port 80 or 443 (HTTP's and HTTPS's default: the scheme
  may be a proxy's). Else 421 (400 without a usable `Host`).
- **Origin**: a request that changes state (every method but GET, HEAD and OPTIONS)
  carrying an `Origin` is served only from the server's own origin (`Origin` equal to
  `Host`: another port of 127.0.0.1 is another origin) or from a name added with
  `--allow-host` (with its port, if it gives one; an `Origin` without a port has its
  scheme's). Else 403. Clients that are not browsers send no `Origin`.
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
import re
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


#: The port a `Host` without one names: HTTP's or HTTPS's default (behind a TLS proxy).
DEFAULT_PORTS = (80, 443)
#: A host name: labels of letters, digits, `-` and `_`, joined by dots.
HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")


def host_and_port(value):
    """`(name, port)` of a `Host` header value (`NAME`, `NAME:PORT`, `[V6]:PORT`): the
    name or address lower-cased (an address written as `ipaddress` writes it), the port
    an int or None when it gives none; None when the value holds no name."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and rest[:1] != ":"):
            return None
        port = rest[1:] if rest else None
    else:
        name, colon, port = value.partition(":")
        port = port if colon else None
    if not name or (port is not None and not (port.isdigit() and int(port) <= 65535)):
        return None
    return _written(name), None if port is None else int(port)


def allowed_name(value):
    """`(name, port)` of an `--allow-host` value: `NAME` (port None: any port) or
    `NAME:PORT`, NAME a host name or an IP address (an IPv6 one in brackets before a
    port), as a browser's address bar has it.

    Raises:
        ValueError: for anything else (a scheme, a path, a port out of range).
    """
    if _address(value.strip()) is not None:  # an IPv6 address without brackets too
        return _written(value.strip().lower()), None
    parsed = host_and_port(value)
    if parsed is None or not (HOST_NAME.fullmatch(parsed[0]) or _address(parsed[0])):
        raise ValueError(
            f"--allow-host {shown(value)}: give a host name or an address as a browser's "
            "address bar has it, without http://, e.g. --allow-host myhost.lan (any port) "
            "or --allow-host myhost.lan:8080 (that port only)"
        )
    return parsed


def _address(name):
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _written(name):
    """`name`, or the address it is written as `ipaddress` writes it (`::1` for `0::1`)."""
    address = _address(name.partition("%")[0])
    return name if address is None else str(address)


class Hosts:
    """The names a request's `Host` may give, and the origins whose pages may post.

    Args:
        listening: the address the server listens on (`--host`).
        added: the values of `--allow-host` (`NAME` or `NAME:PORT`, see `allowed_name`):
            their `Host` and their pages' `Origin` are allowed, on any port or on PORT.
        bound: the address the socket was bound to, which the server prints as its URL
            (`--host myhost.lan` listens on the address the name resolves to).
        port: the port the server listens on, which a `Host` giving one of the server's
            own names must give; None: any port (an application made without its
            socket). Defaults to None.

    Raises:
        ValueError: for a value of `added` that is no name (`allowed_name`).
    """

    def __init__(self, listening, added=(), bound=None, port=None):
        listening = _written(listening.strip("[]").lower())
        address = _address(listening)
        self.any_address = address is not None and address.is_unspecified
        self.port = port
        self.added = {}  # name -> the ports allowed, None for any
        for value in added:
            name, given = allowed_name(value)
            ports = self.added.get(name, set())
            self.added[name] = None if ports is None or given is None else ports | {given}
        self.names = {"localhost"}
        if not self.any_address:
            self.names.add(listening)
            if bound is not None:
                self.names.add(_written(bound))

    def allows(self, name, port):
        """Whether a `Host` of `name` and `port` (from `host_and_port`) names this server."""
        return (self.own(name) and _same_port(port, self.port)) or self.added_with(name, port)

    def own(self, name):
        """Whether `name` is one of the server's own names, on whatever port."""
        address = _address(name)
        if address is not None and (address.is_loopback or self.any_address):
            return True
        return name in self.names

    def added_with(self, name, port):
        """Whether `--allow-host` added `name` with `port` (None: a default port)."""
        if name not in self.added:
            return False
        return self.added[name] is None or any(_same_port(port, allowed)
                                               for allowed in self.added[name])


def _same_port(given, port):
    """Whether a port `given` (None: a default port) is `port` (None: any)."""
    return port is None or (port in DEFAULT_PORTS if given is None else given == port)


class Guard:
    """ASGI middleware: the `Host` and `Origin` checks, and the security headers on
    every answer (see the module's description).

    Args:
        app: the ASGI application guarded.
        hosts: the `Hosts` served.
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
        parsed = host_and_port(given)
        if parsed is None:
            return 400, f"the Host header {shown(given, 60)} names no host"
        if not self.hosts.allows(*parsed):
            name, port = parsed
            if self.hosts.own(name):
                named = "none (80 or 443)" if port is None else f"port {port}"
                return 421, (f"this server listens on port {self.hosts.port}, and the Host "
                             f"header names {named} (a tunnel or a proxy?); to serve it, "
                             f"start it with --allow-host {shown(given.strip().lower(), 60)}")
            return 421, (f"this server does not answer to the name {shown(name, 60)}; "
                         "to serve it, start it with --allow-host NAME (or NAME:PORT)")
        origin = headers.get(b"origin")
        if origin is None or scope["method"] in READING:
            return None
        if self._own_or_added(origin, given):
            return None
        return 403, (f"a page of another origin ({shown(origin, 60)}) may not use this "
                     "server; open its own page, or start it with --allow-host NAME")

    def _own_or_added(self, origin, host):
        """Whether `origin` is the server's own (that of `host`, the `Host` header) or
        one of a name added with `--allow-host`."""
        try:
            parts = urlsplit(origin.strip().lower())
            port = parts.port
        except ValueError:  # a bracket not closed, a port that is not one
            return False
        if not parts.netloc:
            return False
        if parts.netloc == host.strip().lower():
            return True
        if port is None:
            port = {"http": 80, "https": 443}.get(parts.scheme)
        return parts.hostname is not None and self.hosts.added_with(_written(parts.hostname),
                                                                    port)


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
