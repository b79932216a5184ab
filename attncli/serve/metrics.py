"""What `GET /metrics` tells a Prometheus scraper, in its text format (prometheus-client).

    attncli_requests_total{route, status}      requests answered, by route and status
    attncli_errors_total{route, kind}          of them, refused ("client", 4xx) or failed
                                               ("server", 5xx)
    attncli_request_seconds{route}             a histogram of the time to answer
    attncli_queue_texts                        texts waiting or being translated now
    attncli_batch_texts                        a histogram of the texts per batch run

A route is the path of one of the server's routes (`/translate`, ...); any other path is
counted as `other`, so that a client asking for made-up paths cannot grow the series
without bound. Every request is counted, those the `Guard` and the token refuse included.
Each application has a registry of its own (two servers in one process count apart).
"""

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

ROUTES = ("/", "/health", "/models", "/translate", "/inspect", "/step", "/metrics",
          "/docs", "/openapi.json")
#: Seconds: a page's request is milliseconds, a long beam search over many texts minutes.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
#: Texts per batch run.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Metrics:
    """The server's counters, with `queue_depth()` read at each scrape.

    Args:
        queue_depth: a function returning the texts waiting or being translated.
    """

    def __init__(self, queue_depth):
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("attncli_requests", "Requests answered, by route and status.",
                                ["route", "status"], registry=self.registry)
        self.errors = Counter("attncli_errors", "Requests refused (client, 4xx) or failed "
                              "(server, 5xx), by route.", ["route", "kind"],
                              registry=self.registry)
        self.latency = Histogram("attncli_request_seconds", "Seconds to answer a request, "
                                 "by route.", ["route"], buckets=LATENCY_BUCKETS,
                                 registry=self.registry)
        self.queue = Gauge("attncli_queue_texts", "Texts waiting or being translated.",
                           registry=self.registry)
        self.queue.set_function(queue_depth)
        self.batches = Histogram("attncli_batch_texts", "Texts per batch run.",
                                 buckets=BATCH_BUCKETS, registry=self.registry)

    def counted(self, run):
        """`run(key, texts)` (the batcher's) observing each batch's number of texts."""

        def running(key, texts):
            self.batches.observe(len(texts))
            return run(key, texts)

        return running

    def observe(self, path, status, seconds):
        """Count one answered request."""
        route = path if path in ROUTES else "other"
        self.requests.labels(route, str(status)).inc()
        if status >= 400:
            self.errors.labels(route, "server" if status >= 500 else "client").inc()
        self.latency.labels(route).observe(seconds)

    def text(self, accept):
        """`(body, content type)` of a scrape whose `Accept` header is `accept`: the
        text format 0.0.4 unless a newer one (or OpenMetrics) is asked for, as
        prometheus-client's own handlers answer."""
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type


class Measured:
    """ASGI middleware: each HTTP request's route, status and time to answer, given to
    `metrics.observe` when its answer is sent (a client gone before it has status 499,
    nginx's name for it)."""

    def __init__(self, app, metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = 499

        async def sending(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            status = 500
            raise
        finally:
            self.metrics.observe(scope["path"], status, time.perf_counter() - started)
