"""`GET /metrics`: the server's metrics (`attncli.serve.metrics`) for a Prometheus scraper."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from attncli.serve.dependencies import Counters

router = APIRouter()


@router.get("/metrics", response_class=Response)
async def scrape(request: Request, metrics: Counters):
    """The server's metrics in Prometheus's text format."""
    body, content_type = metrics.text(request.headers.get("accept"))
    return Response(body, headers={"Content-Type": content_type})
