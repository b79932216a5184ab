"""`GET /health` and `GET /models`: whether the server is ready, and what it serves."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from attncli.serve import schemas
from attncli.serve.dependencies import Loading, Models, Worker

router = APIRouter()


@router.get("/health")
async def health(registry: Loading, batcher: Worker):
    """200 once every model is loaded and its searches traced; 503 before."""
    if not registry.ready:
        return JSONResponse({"status": "loading"}, 503, {"Retry-After": "5"})
    return {"status": "ready", "models": list(registry.models), "queued": batcher.pending}


@router.get("/models", response_model=schemas.ModelsResponse)
async def models(registry: Models):
    """Each model's name, task, tokenizer levels and decoding defaults."""
    return {"default": registry.default,
            "models": [model.describe() for model in registry.models.values()]}
