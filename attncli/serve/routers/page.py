"""`GET /`: the attention page (`attncli.serve.page`), with its Content-Security-Policy."""

import functools

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from attncli.serve.page import content_security_policy, page_html

router = APIRouter()


@functools.cache
def served_page():
    """`(page, headers)`, built once: the page's files do not change while it serves."""
    text = page_html()
    return text, {"Content-Security-Policy": content_security_policy(text)}


@router.get("/", response_class=HTMLResponse)
async def page():
    """The attention page."""
    text, headers = served_page()
    return HTMLResponse(text, headers=headers)
