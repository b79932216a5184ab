"""The routes of `attncli serve`, one `APIRouter` per concern, which `create_app` includes.

- `translation`: `POST /translate`.
- `inspection`: `POST /inspect` and `POST /step`, the attention of one sentence.
- `models`: `GET /health` and `GET /models`.
- `page`: `GET /`, the attention page.
- `metrics`: `GET /metrics`, in Prometheus's text format.

A route reads the server's parts through `attncli.serve.dependencies`.
"""
