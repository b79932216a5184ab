"""The attention page as one HTML string: served at `/`, or written as a file that works
with no server at all (`attncli inspect-weights RUN --text S --html FILE`).

The page's files ship in `attncli/serve/page/` (`index.html`, `attention.css`,
`attention.js`). `page_html()` inlines the stylesheet and the script; with `embedded`
the sentence's attention view and every step's walk go into
`<script type="application/json" id="attncli-data">`, and the page reads them instead
of asking a server.
"""

import base64
import hashlib
import json
import re
from importlib import resources
from pathlib import Path

from attncli.errors import AttncliError

STYLESHEET = '<link rel="stylesheet" href="static/attention.css">'
SCRIPT = '<script src="static/attention.js"></script>'
DATA = '<script type="application/json" id="attncli-data"></script>'


def page_file(name):
    """The text of one of the page's files (`index.html`, `attention.css`,
    `attention.js`), read from the installed package."""
    return resources.files("attncli.serve").joinpath("page", name).read_text(encoding="utf-8")


def embedded_json(data):
    """`data` as JSON that is safe inside a `<script>` element.

    The HTML parser ends a script at the first `</script` whatever it is inside, and
    `<!--` changes how it reads on; a token may hold either. Every `<`, `>` and `&` is
    written as a JSON escape (`\\u003c`, ...), which `JSON.parse` reads back unchanged,
    so no markup can appear. NaN and infinities are refused: JSON has no such numbers.
    """
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for character, escape in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                              ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(character, escape)
    return text


def _inline(page, tag, replacement):
    if page.count(tag) != 1:
        raise ValueError(f"index.html must hold {tag} exactly once")
    return page.replace(tag, replacement)


def page_html(embedded=None):
    """The page with its stylesheet and script inlined, as one HTML string.

    Args:
        embedded: None for the page a server serves (it asks `/models`, `/translate`,
            `/inspect` and `/step`), or a dict that makes the page work offline: a
            `SentenceView.to_dict(words=True)` plus `"steps"` (`view.steps(width=8)`),
            `"model"` (its name), `"search"` (the settings used) and `"show_words"`
            (whether it opens on the words view). Default: None.

    Returns:
        str: the whole page.
    """
    css, script = page_file("attention.css"), page_file("attention.js")
    # Neither file may close the element it is inlined into.
    if "</style" in css.lower() or "</script" in script.lower():
        raise ValueError("attention.css or attention.js closes its own element")
    page = _inline(page_file("index.html"), STYLESHEET, f"<style>\n{css}</style>")
    data = "" if embedded is None else embedded_json(embedded)
    page = _inline(page, DATA, f'<script type="application/json" id="attncli-data">{data}'
                               "</script>")
    return _inline(page, SCRIPT, f"<script>\n{script}</script>")


def content_security_policy(page):
    """The Content-Security-Policy a server sends with `page` (a `page_html()`): the
    page's own inline stylesheet and script, named by their SHA-256 (CSP Level 2's hash
    sources), and nothing else runs or styles it (the JSON data block is never run);
    it asks its own server only, its form is sent by its script alone, and no page may
    frame it."""

    def sources(tag):
        texts = re.findall(rf"<{tag}>(.*?)</{tag}>", page, flags=re.DOTALL)
        return " ".join(
            f"'sha256-{base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()}'"
            for text in texts)

    return (f"default-src 'none'; script-src {sources('script')}; style-src "
            f"{sources('style')}; connect-src 'self'; img-src data:; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'")


def check_html_path(path):
    """Refuse an `--html FILE` that cannot be written, before the model is loaded: its
    name ends in .html (or .htm), it is not a folder, and its folder exists or can be
    made in one step (as `--png-dir DIR` is)."""
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise AttncliError(f"--html {path}: the page is an HTML file; name it with .html")
    if path.is_dir():
        raise AttncliError(f"--html {path} is a folder; give a file name ending in .html")
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        raise AttncliError(f"--html {path}: {folder} is a file, not a folder")
    if not folder.exists() and not folder.parent.is_dir():
        raise AttncliError(f"--html {path}: no such folder {folder.parent}")
    return path


def offline_page(view, model, search, words=False, gold=None, attention=None):
    """The page of one sentence that works with no server: `view` (a `SentenceView`)
    with its words view (`gold` links in it if given) and every step of every
    attention, layer and head (vectors cut to 8 components), the model's name and the
    `Decoding` used; `words`: the page opens on the words view; `attention`: on that
    attention (`attncli.attentions`; None: the cross-attention)."""
    data = {**view.to_dict(words=True, gold=gold), "steps": view.steps(width=8),
            "model": model, "search": search.to_dict(), "show_words": bool(words)}
    if attention is not None:
        data["show_attention"] = attention
    return page_html(_rounded(data))


def _rounded(data, digits=6):
    """`data` with every float cut to `digits` significant digits: the page shows
    three or four decimals, and the file is half the size."""
    if isinstance(data, float):
        return float(f"{data:.{digits}g}")
    if isinstance(data, dict):
        return {key: _rounded(value, digits) for key, value in data.items()}
    if isinstance(data, list):
        return [_rounded(value, digits) for value in data]
    return data


def write_offline_page(path, view, model, search, words=False, gold=None, attention=None):
    """Write `offline_page(...)` to `path` (checked by `check_html_path`), making its
    folder if it is missing."""
    path = check_html_path(path)
    page = offline_page(view, model, search, words, gold, attention)
    try:
        path.parent.mkdir(exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as error:
        raise AttncliError(f"--html {path}: cannot write it ({error.strerror})") from None
    return path
