"""The JSON bodies of the API: what a request may hold, and what a response holds.

Requests are validated strictly: a field of the wrong type (`"beam": "5"`,
`"alignments": 1`) or a field the API does not know is refused, not converted or
ignored, and so is a string that is not text (`NOT_TEXT`), wherever it is.

The response models of `/translate` and `/models` are the routes' `response_model`s:
FastAPI validates each answer against them, and writes the fields a route set, in the
order they are declared here (an answer leaves out the fields its request did not ask
for: `response_model_exclude_unset`). `/inspect` and `/step` answer the attention view's
own dicts (`attncli.search.inspection`), which no model here describes.
"""

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from attncli.attentions import ATTENTIONS
from attncli.errors import clipped, shown
from attncli.serve.limits import RequestError
from attncli.serve.registry import ENGINES

#: What no text holds: a lone surrogate (half of a UTF-16 pair: JSON's `"\ud800"`
#: escape makes one, and no encoder can write it) and the 66 non-characters, which
#: Unicode keeps out of interchange (U+FDD0..U+FDEF and the last two of each plane).
NOT_TEXT = re.compile("[\ud800-\udfff\ufdd0-\ufdef" + "".join(
    chr(plane << 16 | 0xFFFE) + chr(plane << 16 | 0xFFFF) for plane in range(17)) + "]")

MODEL_NAME = Field(None, max_length=200,
                   description="A model's name (GET /models); the first model if absent.")
BEAM = Field(None, description="Beam size (1: greedy search); the run's own if absent.")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TranslateRequest(Strict):
    texts: list[str] = Field(description="The sentences, one per text; a text that is empty "
                             "or whitespace gets an empty translation, as in attncli "
                             "translate.")
    model: str | None = MODEL_NAME
    beam: int | None = BEAM
    n_best: int | None = Field(None, description="Return this many hypotheses per text, "
                               "best first, under `hypotheses` (at most the beam).")
    alpha: float | None = Field(None, description="The length penalty's exponent.")
    alignments: bool = Field(False, description="Add each translation's word alignment "
                             "(Pharaoh `i-j` pairs) and the words it counts.")
    attention: bool = Field(False, description="Add the attention weights (output tokens "
                            "x source tokens) and the tokens.")
    token_log_probs: bool = Field(False, description="Add the tokens and each one's log "
                                  "probability (`token_log_probs`; not with the ctranslate2 "
                                  "engine).")
    prefix: str | None = Field(None, description="Every translation begins with this text "
                               "(tokenized as the target side, its tokens forced, then the "
                               "search goes on), as attncli translate --prefix.")
    sampling: str | None = Field(None, description="random, topk:K or topp:P: draw each "
                                 "translation at random instead of searching (no beam; "
                                 "n_best draws that many), as attncli translate --sampling "
                                 "(not with the ctranslate2 engine).")
    temperature: float | None = Field(None, description="Sampling's temperature; 1 if "
                                      "absent.")
    seed: int | None = Field(None, description="Sampling's seed, in [0, 2**63 - 1]; the same "
                             "seed draws the same translations. 0 if absent.")


class InspectRequest(Strict):
    text: str = Field(description="One sentence.")
    model: str | None = MODEL_NAME
    beam: int | None = BEAM
    reference: str | None = Field(None, description="A translation of the text to look at "
                                  "instead of the model's own (forced decoding; nothing is "
                                  "searched, so no beam); its score is under `reference`.")
    words: bool | None = Field(None, description="Add the words view under `words`: every "
                               "attention folded into the texts' space-separated words (a "
                               "row word is the mean of its pieces' rows, a column word "
                               "the sum of its pieces' columns).")
    gold: str | None = Field(None, description="The gold links of text and reference, in "
                             "the talp format (1-based `i-j` sure, `ipj` possible; i a "
                             "source word); added to the words view.")


class StepRequest(InspectRequest):
    attention: Literal[ATTENTIONS] = Field(
        "cross", description="Which attention (`attncli.attentions`): cross (the "
        "decoder's over the source), encoder or decoder (their self-attention), or "
        "alignment (the alignment layer of a model with one; one layer, one head).")
    layer: int | None = Field(None, description="1-based block; the last if absent.")
    head: int | None = Field(None, description="1-based head; head 1 if absent.")
    step: int = Field(description="1-based query position (an output token for cross "
                      "and decoder attention).")


#: What a response's `token_log_probs` are.
TOKEN_LOG_PROBS = Field(
    None, description="With \"token_log_probs\": one number per output token, [END] "
    "included: log p(y_t | y_<t, x), the terms the search summed, so their sum is log P "
    "= score x lp. An ensemble's are of its members' mean distribution. A sampled "
    "token's are under the model itself (temperature 1, no top-k or top-p cut), not "
    "the distribution it was drawn from. A value of -inf (in a slot of the beam that no "
    "hypothesis filled, whose score is null) is null.")


class Hypothesis(BaseModel):
    text: str
    score: float | None = Field(description="Its score, log P / lp; null in a slot of the "
                                "beam that no hypothesis filled.")
    words: list[str] | None = None
    alignment: str | None = None
    tokens: list[str] | None = None
    weights: list[list[float]] | None = None
    token_log_probs: list[float | None] | None = TOKEN_LOG_PROBS


class Translated(BaseModel):
    text: str = Field(description="The best translation: the line attncli translate "
                      "prints with the same settings (and no --n-best).")
    score: float | None = Field(description="Its score, log P / lp; null for an empty text.")
    words: list[str] | None = None
    alignment: str | None = None
    tokens: list[str] | None = None
    weights: list[list[float]] | None = None
    token_log_probs: list[float | None] | None = TOKEN_LOG_PROBS
    source_tokens: list[str] | None = None
    source_words: list[str] | None = None
    hypotheses: list[Hypothesis] | None = None


class TranslateResponse(BaseModel):
    translations: list[Translated]


class ModelDescription(BaseModel):
    name: str
    engine: Literal[tuple(ENGINES)] = Field(
        description="What runs it: attncli's own search (a run), or CTranslate2 (an export "
        "of attncli export --format ctranslate2).")
    task: str
    members: int
    source_level: str
    target_level: str
    decoding: dict
    max_length: int | None = Field(description="The run's data.max_length: training pairs "
                                   "with more tokens on either side were dropped, so the "
                                   "model never saw a longer sentence; null when unknown.")
    inspect_refusal: str | None = Field(
        description="null when /inspect and /step show the model's attention; else the one "
        "line they answer (422), saying why not.")


class ModelsResponse(BaseModel):
    default: str
    models: list[ModelDescription]


class ErrorResponse(BaseModel):
    error: str


def parse(model, data):
    """`data` (decoded JSON) as a `model` instance.

    Raises:
        RequestError: 422, the first problem in one line (`texts[2]: Input should be a
            valid string`).
    """
    check_text(data)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = _where(first["loc"])
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            known = ", ".join(model.model_fields)
            message = f"unknown field; the fields are {known}"
        elif first["type"] == "missing":
            message = "missing: this field is required"
        elif "input" in first and not isinstance(first["input"], (dict, list)):
            message += f". Received: {shown(first['input'], 40)}"
        raise RequestError(422, f"{where or 'body'}: {message}") from None


def check_text(data, where=()):
    """Refuse (422) the first string in `data` (decoded JSON), field name or value,
    that holds a character of `NOT_TEXT`, named by where it is (`texts[1]`)."""
    if isinstance(data, str):
        found = NOT_TEXT.search(data)
        if found is not None:
            character = ord(found.group())
            kind = ("a lone surrogate" if 0xD800 <= character <= 0xDFFF else
                    "a non-character")
            raise RequestError(422, f"{_where(where) or 'body'}: not valid Unicode ({kind}, "
                               f"U+{character:04X}, at character {found.start()})")
    elif isinstance(data, dict):
        for key, value in data.items():
            check_text(key, where)
            check_text(value, (*where, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            check_text(value, (*where, index))


def _where(location):
    """A field's place as a message names it (`texts[2]`, `model`), at most 80
    characters; a name no field has is quoted (`['a b']`)."""
    where = "".join(f"[{part}]" if isinstance(part, int) else
                    f".{part}" if part.isidentifier() else f"[{shown(part, 40)}]"
                    for part in location)
    return clipped(where.lstrip("."), 80)
