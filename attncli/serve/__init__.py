"""`attncli serve`: trained models behind an HTTP API, and the attention page.

- `limits`: the limits a request must keep, and `RequestError`, a refusal in one line.
- `access`: who may use the server (hosts, origins, the token) and the headers of every
  answer.
- `registry`: the models a server loaded, each with its translators per search;
  `exported_model` a CTranslate2 export served without TensorFlow.
- `batching`: one worker thread that merges requests into batches and runs every
  TensorFlow call; the event loop only waits for it.
- `schemas`: the JSON bodies of the API, validated with pydantic.
- `app`: the FastAPI application; `page` the attention page; `metrics` what `GET
  /metrics` tells Prometheus.
- `connections`: uvicorn's HTTP protocol within limits: connections, a request's head
  size, and how long its head and body may take.

Nothing here imports TensorFlow at module level: `registry` does when models load.
"""
