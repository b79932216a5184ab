"""A real `attncli serve` process of the 0.1.0 run over real sockets: clients that never
finish their headers or trickle their body are answered 408 and cut off; a request line
or a header too large is refused before it is read whole (414, 431); past
`--max-connections` a connection is answered 503; SIGTERM closes the connections still
sending a request and the process ends while one holds half a body.

The bounds below ("within 20 s") only show that something ends: every timeout of the
server here is 1 or 2 s.
"""

import select
import signal
import socket
import time

import httpx
import pytest
from attncli_process import FIXTURE_RUN
from attncli_runs import start, stop, wait_for
from browser import free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("serve-connections")]

MAX_CONNECTIONS = 6


def serving(tmp_path_factory, *flags):
    """`attncli serve RUN FLAGS` on a free loopback port, ready: (process, port)."""
    port = free_port()
    process = start("serve", FIXTURE_RUN, "--port", port, *flags,
                    cwd=tmp_path_factory.mktemp("serve-connections"))

    def ready():
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        except httpx.TransportError:
            return False

    wait_for(ready, process)
    return process, port


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server whose heads have 1 s and bodies 2 s: its port."""
    process, port = serving(tmp_path_factory, "--header-timeout", 1, "--body-timeout", 2,
                            "--max-connections", MAX_CONNECTIONS)
    try:
        yield port
    finally:
        stop(process)


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=20)


def answer(connection):
    """The status of what the server wrote before it closed the connection (None for
    nothing), read within the connection's timeout."""
    data = b""
    try:
        while chunk := connection.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass  # it closed with bytes of ours unread; what it wrote before is read
    return int(data.split(b" ", 2)[1]) if data else None


def post_head(port):
    """The head of a POST of a 1,000-byte body, as a client of `port` writes it."""
    return (b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: "
            b"application/json\r\nContent-Length: 1000\r\n\r\n" % port)


@pytest.mark.parametrize("sent", [b"", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"],
                         ids=["nothing", "half-headers"])
def test_a_client_that_never_finishes_its_headers_is_cut_off(server, sent):
    clients = [connect(server) for _ in range(3)]
    for client in clients:
        client.sendall(sent)
    started = time.monotonic()
    assert [answer(client) for client in clients] == [408] * 3
    assert time.monotonic() - started < 20
    assert httpx.get(f"http://127.0.0.1:{server}/health").status_code == 200


def test_a_client_that_trickles_its_body_is_cut_off(server):
    client = connect(server)
    client.sendall(post_head(server) + b'{"texts": [')
    started = time.monotonic()
    while time.monotonic() - started < 20:
        if select.select([client], [], [], 0.2)[0]:
            break
        client.sendall(b" ")  # a byte every 0.2 s: 1,000 bytes would take 200 s
    assert answer(client) == 408


@pytest.mark.parametrize("start_of_head, status", [
    (b"GET /", 414),
    (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ", 431),
], ids=["url", "header"])
def test_a_huge_url_or_header_is_refused_before_it_is_read(server, start_of_head, status):
    client = connect(server)
    client.sendall(start_of_head)
    sent, piece = 0, b"a" * 65536
    try:
        while sent < 160 << 20 and not select.select([client], [], [], 0)[0]:
            client.sendall(piece)
            sent += len(piece)
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed by the server
    assert answer(client) == status
    assert sent < 16 << 20  # of 160 MiB: what the sockets' buffers took before the answer
    assert httpx.get(f"http://127.0.0.1:{server}/health").status_code == 200


def test_past_max_connections_a_connection_is_answered_503(server):
    # Opened at once, the connections past the cap are answered 503 at once; the others
    # (sending nothing) 408 when their head's second is over.
    opened = [connect(server) for _ in range(MAX_CONNECTIONS + 1)]
    statuses = [answer(connection) for connection in opened]
    assert statuses[-1] == 503
    assert set(statuses) == {408, 503} and statuses.count(408) <= MAX_CONNECTIONS


def test_sigterm_ends_the_server_while_a_client_holds_half_a_body(tmp_path_factory):
    process, port = serving(tmp_path_factory)  # the default timeouts: 10 s and 30 s
    try:
        holding = connect(port)
        holding.sendall(post_head(port) + b'{"texts": [')
        silent = connect(port)
        idle = connect(port)
        idle.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
        health = b""
        while not health.endswith(b"}"):
            health += idle.recv(65536)
        assert health.startswith(b"HTTP/1.1 200")  # and the connection kept open
        process.send_signal(signal.SIGTERM)
        # A fixed bound, not `process_watch.wait`, since it is what is tested: the server
        # ends on SIGTERM, within 20 s, before the held body's 30 s timeout could end it.
        process.wait(timeout=20)
        assert process.returncode == 0
        assert [answer(client) for client in (holding, silent, idle)] == [None] * 3
    finally:
        if process.poll() is None:
            process.kill()
        stop(process)


def test_timeouts_and_connections_are_checked_at_start():
    from typer.testing import CliRunner

    from attncli.cli.app import app

    for flags, fragment in [(["--header-timeout", "inf"], "--header-timeout must be in [1, "),
                            (["--body-timeout", "0.5"], "--body-timeout must be >= 1"),
                            (["--max-connections", "0"], "--max-connections must be >= 1")]:
        result = CliRunner().invoke(app, ["serve", str(FIXTURE_RUN), *flags])
        assert result.exit_code == 2 and fragment in result.stderr, result.stderr
