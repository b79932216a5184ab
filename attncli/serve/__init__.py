"""`attncli serve`: trained models behind an HTTP API, and the attention page.

The application, laid out as FastAPI's "bigger applications" are:
- `app`: `create_app`, which holds the server's parts and includes the routers, the
  refusals and the middleware.
- `routers`: the routes, one module per concern (translation, inspection and steps,
  models and health, the page, metrics).
- `dependencies`: what a route asks for with `Depends` (the registry, ready or not, the
  limits, the batcher, the metrics, a body parsed into its schema).
- `schemas`: the JSON bodies of the API, validated with pydantic; `request_body` a body
  read within the limits; `refusals` the one-line `{"error": ...}` answers.
- `access`: who may use the server (hosts, origins, the token) and the headers of every
  answer; `metrics` what `GET /metrics` tells Prometheus; `page` the attention page.

The models and the work:
- `limits`: the limits a request must keep, and `RequestError`, a refusal in one line.
- `registry`: the models a server loaded, and the engines that load them;
  `served_model` what the server asks of any model; `tensorflow_model` a run searched by
  attncli, each with its translators per search; `exported_model` a CTranslate2 export
  served without TensorFlow.
- `batching`: one worker thread that merges requests into batches and runs every
  TensorFlow call; the event loop only waits for it.
- `connections`: uvicorn's HTTP protocol within limits: connections, a request's head
  size, and how long its head and body may take.

Nothing here imports TensorFlow at module level: `tensorflow_model` does when models load.
"""
