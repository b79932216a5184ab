"""`attncli serve RUN`: translations and attention over HTTP from one long-lived process.

The socket is bound first (a port in use is a one-line error, `--port 0` picks a free
one), then the models load and their searches trace on the batcher's thread while
`GET /health` answers 503; the line `serving on http://HOST:PORT` on stderr says where
(with a warning when that is beyond loopback and there is no token), and `ready: ...`
when every model is. SIGTERM or Ctrl-C stops taking connections, closes those idle or
still sending a request, finishes the requests in flight (for `STOP_GRACE` seconds at
most: then they are cancelled) and exits 0. `attncli.serve.app` describes the API;
`attncli.serve.access` who may use it, `attncli.serve.connections` how many
connections, how large and for how long.

`--engine ctranslate2` (with `--compute-type float32|int8`) serves CTranslate2 exports
(`attncli export RUN DIR --format ctranslate2`) instead of runs, and the process never
imports TensorFlow (`attncli.serve.exported_model` says what it refuses); the mistakes of
choosing an engine are worded as `attncli translate` words them (`attncli.cli.engines`).

With the TensorFlow engine, TensorFlow is imported with its oneDNN kernels off
(`TF_ENABLE_ONEDNN_OPTS=0`, unless the environment sets it): they keep a compiled
primitive for every input shape they meet, and a server meets every batch size and
source length: its resident memory would grow by 12-14 % over its first few thousand
requests, until that cache is full. Eigen's kernels cost the server the same CPU time
and give the same translations (docs/serving.md, "Memory").
"""

import functools
import gc
import ipaddress
import os
import re
import signal
import socket
import sys
import time

from rich.markup import escape

from attncli.cli.engines import (
    check_engine, model_path, refuse_tensorflow_options, require_ctranslate2,
)
from attncli.cli.runs import run_name
from attncli.errors import AttncliError, clipped, first_line, shown

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: Seconds the requests being answered get to finish when the server stops.
STOP_GRACE = 30


def model_specs(run_path, ensemble, named, engine="tensorflow"):
    """`(name, [model directory, ...])` of RUN (with its `--ensemble`) and each
    `--model NAME=RUN`, in order, checked: runs for the `tensorflow` engine, CTranslate2
    exports for `ctranslate2` (`attncli.cli.engines.model_path`)."""
    specs = []
    if run_path is not None:
        directory = model_path(run_path, engine, "serve")
        members = [directory, *(model_path(other, engine, "serve") for other in ensemble)]
        specs.append((run_name(run_path, directory), members))
    elif ensemble:
        raise AttncliError("--ensemble decodes other runs together with RUN: give RUN")
    for spec in named:
        name, equals, path = spec.partition("=")
        if not equals or not path:
            raise AttncliError(
                f"--model {shown(spec)}: write NAME=RUN, e.g. --model es-en=runs/default"
            )
        if not NAME.fullmatch(name):
            raise AttncliError(
                f"--model {shown(spec)}: a name is letters, digits, '.', '_' and '-' (at most 64)"
            )
        specs.append((name, [model_path(path, engine, "serve")]))
    if not specs:
        raise AttncliError("give a RUN to serve, or --model NAME=RUN (repeatable)")
    names = [name for name, _ in specs]
    for name in names:
        if names.count(name) > 1:
            raise AttncliError(f"two models are named {name!r}: name them with --model NAME=RUN")
    return specs


def listen(host, port):
    """A socket listening on `host:port` (port 0: a free one)."""
    if not 0 <= port <= 65535:
        # getaddrinfo refuses -1 in a message that blames the host, and takes 65536
        # for 0: a free port.
        raise AttncliError(f"--port {port}: a port is 0 to 65535 (0 picks a free one)")
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        raise AttncliError(
            f"--host {clipped(host)}: not an address of this machine ({error.strerror})"
        ) from None
    sock = socket.socket(info[0], socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(info[4])
        sock.listen(2048)
    except OSError as error:
        sock.close()
        raise AttncliError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    return sock


def allowed_hosts(host, allowed, bound=None, port=None):
    """The `Hosts` of `--host`, each `--allow-host NAME[:PORT]` and the address and port
    `bound` to, checked: a name is a host name or an IP address, without a scheme or a
    path (`attncli.serve.access.allowed_name`)."""
    from attncli.serve.access import Hosts

    try:
        return Hosts(host, allowed, bound, port)
    except ValueError as error:
        raise AttncliError(str(error)) from None


def shown_address(address):
    """`address` as a URL writes it (an IPv6 one in brackets), escaped for Rich's markup,
    where `[fe80::1]` would read as a style tag and vanish."""
    return escape(f"[{address}]" if ":" in address else address)


def load_for_life(registry):
    """Load and trace `registry`'s models, then freeze what lives as long as the server.

    Out of the cyclic collector's sight, a full collection (which holds the GIL) no longer
    walks the models and their traces: half a million objects for the smallest model,
    0.7 to 2 s in which no request was answered, at random (docs/serving.md, "Fairness
    and churn").
    """
    registry.load()
    gc.collect()
    gc.freeze()


def serve(*, run_path, ensemble, named, host, port, allowed, token, limits, console,
          load_tensorflow, engine="tensorflow", compute_type=None):
    """Run `attncli serve` until SIGTERM or Ctrl-C; returns the exit code."""
    from attncli.serve.limits import Limits

    check_engine(engine, compute_type)
    if engine == "ctranslate2":
        refuse_tensorflow_options({"--ensemble": ensemble})
        require_ctranslate2()
    specs = model_specs(run_path, ensemble, named, engine)
    hosts = allowed_hosts(host, allowed)
    try:
        limits = Limits(**limits)
    except ValueError as error:
        raise AttncliError(str(error)) from None
    if token is not None and not token.strip():
        raise AttncliError("--token is empty: give the token clients must send")
    # What a bearer token may hold (RFC 6750's b64token); the page's cookie carries it too,
    # where ';', spaces, quotes and non-ASCII characters would cut or break it.
    if token is not None and not re.fullmatch(r"[A-Za-z0-9._~+/-]+=*", token):
        raise AttncliError(
            "--token may hold letters, digits and . _ ~ + / - (then = signs) only: "
            "choose another token"
        )
    sock = listen(host, port)
    bound = sock.getsockname()
    # The URL printed must be one the server answers.
    hosts = allowed_hosts(host, allowed, *bound[:2])
    where = shown_address(bound[0])
    console.print(f"serving on http://{where}:{bound[1]} (loading {len(specs)} model"
                  f"{'s' if len(specs) > 1 else ''}; GET /health answers 503 until ready)",
                  highlight=False, soft_wrap=True)
    if token is None and not ipaddress.ip_address(bound[0].partition("%")[0]).is_loopback:
        console.print(f"[bold red]WARNING:[/] listening on {where}, beyond this machine, "
                      "with no --token: anyone who can reach this port can use the server. "
                      "Give --token (or ATTNCLI_TOKEN), or --host 127.0.0.1",
                      highlight=False, soft_wrap=True)

    import uvicorn

    from attncli.serve.app import create_app
    from attncli.serve.connections import LimitedHttp
    from attncli.serve.registry import Registry

    registry = Registry(specs, limits, engine,
                        {} if compute_type is None else {"compute_type": compute_type})
    started = time.monotonic()
    failures = []
    loaded = []  # the loading's outcome, once it has one

    def load():
        if registry.engine.tensorflow:
            os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
            load_tensorflow()
        load_for_life(registry)

    def on_loaded(error):
        loaded.append(error)
        if error is None:
            done = "loaded and traced" if registry.engine.tensorflow else "loaded"
            console.print(f"ready: {', '.join(registry.models)} {done} in "
                          f"{time.monotonic() - started:.1f} s", highlight=False, soft_wrap=True)
            return
        failures.append(error)
        server.should_exit = True

    app = create_app(registry, limits, token=token, load=load, on_loaded=on_loaded,
                     hosts=hosts)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            http=functools.partial(LimitedHttp, limits=limits),
                            timeout_graceful_shutdown=STOP_GRACE)
    server = uvicorn.Server(config)
    # uvicorn handles SIGTERM and SIGINT while it runs (stop listening, finish the
    # requests in flight), then raises the signal again for the handler it found:
    # ignoring it then ends the command normally, with exit code 0.
    for handled in (signal.SIGTERM, signal.SIGINT):
        signal.signal(handled, lambda *_: None)
    sys.stderr.flush()
    stderr = os.dup(2)
    server.run(sockets=[sock])
    if not loaded:
        # Stopped while the models load: the loading thread cannot be interrupted, and
        # nothing is written, so the process ends without waiting for it. Its import of
        # TensorFlow may hold descriptor 2 on /dev/null (`import_tensorflow`): the line
        # goes to the stderr the command started with.
        sys.stdout.flush()
        os.write(stderr, b"stopped while loading\n")
        os._exit(0)
    os.close(stderr)
    if failures:
        error = failures[0]
        if isinstance(error, AttncliError):
            raise AttncliError(f"cannot serve: {error}")
        raise AttncliError(f"cannot serve: {first_line(error)}")
    console.print("stopped", highlight=False)
    sys.stderr.flush()
    return 0
