"""The JSON bodies of the API: what a request may hold, and what a response holds.

Requests are validated strictly: a field of the wrong type (`"beam": "5"`,
`"alignments": 1`) or a field the API does not know is refused, not converted or
ignored. The response models document the API at `/docs`; responses are built as
plain dicts.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from attncli.errors import shown
from attncli.serve.limits import RequestError

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
    prefix: str | None = Field(None, description="Every translation begins with this text "
                               "(tokenized as the target side, its tokens forced, then the "
                               "search goes on), as attncli translate --prefix.")
    sampling: str | None = Field(None, description="random, topk:K or topp:P: draw each "
                                 "translation at random instead of searching (no beam; "
                                 "n_best draws that many), as attncli translate --sampling.")
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
    attention: Literal["cross", "encoder", "decoder"] = "cross"
    layer: int | None = Field(None, description="1-based block; the last if absent.")
    head: int | None = Field(None, description="1-based head; head 1 if absent.")
    step: int = Field(description="1-based query position (an output token for cross "
                      "and decoder attention).")


class Hypothesis(BaseModel):
    text: str
    score: float
    words: list[str] | None = None
    alignment: str | None = None
    tokens: list[str] | None = None
    weights: list[list[float]] | None = None


class Translated(BaseModel):
    text: str = Field(description="The best translation: the line attncli translate "
                      "prints with the same settings (and no --n-best).")
    score: float | None = Field(description="Its score, log P / lp; null for an empty text.")
    source_tokens: list[str] | None = None
    source_words: list[str] | None = None
    words: list[str] | None = None
    alignment: str | None = None
    tokens: list[str] | None = None
    weights: list[list[float]] | None = None
    hypotheses: list[Hypothesis] | None = None


class TranslateResponse(BaseModel):
    translations: list[Translated]


class ModelDescription(BaseModel):
    name: str
    task: str
    members: int
    source_level: str
    target_level: str
    decoding: dict


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
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]
        ).lstrip(".")
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            known = ", ".join(model.model_fields)
            message = f"unknown field; the fields are {known}"
        elif first["type"] == "missing":
            message = "missing: this field is required"
        elif "input" in first and not isinstance(first["input"], (dict, list)):
            message += f". Received: {shown(first['input'], 40)}"
        raise RequestError(422, f"{where or 'body'}: {message}") from None
