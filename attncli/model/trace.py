"""One step of one attention, as the model computed it: the record its layer kept,
chosen and labelled for `inspect-weights --step`, `score-demo` and the server.

    scores[s]  = score(q, k_s)                 for every key; mask[s]: may the query see it
    weights    = softmax(scores) over the mask (local-p: times its Gaussian)
    context    = sum_s weights[s] v_s          = weights @ values

The model reports its attentions itself: each layer of `layers/` called with
`return_steps=True` returns its `layers.AttentionRecord`, the blocks pass theirs up, and
`Seq2Seq.teacher_forced(..., return_steps=True)` returns every attention's, layer by
layer. `trace_attentions` takes them as NumPy arrays for one sentence; `select_step`
chooses one attention, layer, head and query and labels it (`AttentionStep`: its
tokens, its score as the registries name it, `ScoreKind`); `labelled_step` labels a
query of any record (score-demo's). Nothing here computes an attention. The names of
the attentions are `attncli.attentions`'.
"""

import dataclasses
import math

import numpy as np

from attncli.attentions import ATTENTIONS, NO_ALIGNMENT_LAYER
from attncli.scores import ALIGNMENTS, SCORES

# A record's parts that have a heads axis in a multi-head layer's record, those with
# one row per query, and (once one head's query is chosen) those with one row per key.
_HEAD_PARTS = ("query", "keys", "values", "scores", "mask", "softmax", "weights",
               "context", "projected_keys", "gaussian")
_QUERY_PARTS = ("query", "scores", "mask", "softmax", "weights", "context", "gaussian",
                "aligned_positions", "query_input")
_KEY_PARTS = ("keys", "values", "projected_keys", "key_input", "scores", "mask",
              "softmax", "weights", "gaussian")


@dataclasses.dataclass(frozen=True)
class ScoreKind:
    """An attention's score, by the names of the registries (`attncli.scores`).

    Attributes:
        score: a name of `SCORES` (`"scaled_dot"`, `"general"`, ...).
        alignment: a name of `ALIGNMENTS` for an attention configured with one (a
            recurrent decoder's: `"global"`, `"local-m"`, `"local-p"`), else None.
        window: the half-width `D` of a local alignment, else None.
    """

    score: str
    alignment: str | None = None
    window: int | None = None

    @property
    def local(self):
        """Whether the query sees a window of the keys (Luong et al. 2015, 3.2)."""
        return self.alignment is not None and ALIGNMENTS[self.alignment].local

    @property
    def label(self):
        """The score as tables and `/step` name it: `"general, local-p"`, `"scaled_dot"`."""
        return self.score if self.alignment is None else f"{self.score}, {self.alignment}"

    def formula(self, key_dim=None):
        """The score `score(q, k)` written out, `√d` given its value `key_dim`, followed
        by the keys a local alignment keeps."""
        text = SCORES[self.score].formula.split(" = ", 1)[1]
        if key_dim is not None:
            text = text.replace("√d", f"√{key_dim}")
        window = ALIGNMENTS[self.alignment or "global"].window
        return f"{text} {window}" if window else text


def _norm(vector):
    return float(np.linalg.norm(np.asarray(vector, "float64")))


@dataclasses.dataclass(frozen=True)
class AttentionStep:
    """One query of one head of one attention, with its labels.

    Attributes:
        record: the `layers.AttentionRecord` of this query and head, NumPy arrays with
            no batch, heads or query axis: `query` `(d,)`, `keys` `(S, d_k)` (a
            recurrent decoder's and the alignment layer's: the encoder states
            `h̄_s`; a head's `x_s W_k + b_k`), `values` `(S, d_v)`, `scores`, `mask`,
            `softmax`, `weights` `(S,)`, `context` `(d_v,)`, `projected_keys`,
            `aligned_positions` (`p_t`, a number), `gaussian` `(S,)`, `query_input`
            `(d_model,)` and `key_input` `(S, d_in)` where the layer has them. `S` is
            the number of keys shown (`key_tokens`).
        attention: `"cross"` (the decoder's attention over the source), `"encoder"`
            or `"decoder"` (their self-attention), `"alignment"` (the alignment layer).
        layer: int, the 1-based block; 1 for a recurrent decoder's attention and for
            the alignment layer.
        head: int, the 1-based head, or None for single-head attention.
        step: int, the 1-based query position (the output token for cross and
            decoder attention, the source token for the encoder's).
        kind: the `ScoreKind` of the attention.
        query_token: str, the token of the query position.
        key_tokens: list of str, one per key position.
    """

    record: object
    attention: str
    layer: int
    head: int | None
    step: int
    kind: ScoreKind
    query_token: str
    key_tokens: list

    @property
    def formula(self):
        """The score written out, `√d` the query's size (`ScoreKind.formula`)."""
        return self.kind.formula(len(self.record.query))

    def to_dict(self, width=None):
        """The step as JSON-safe Python values.

        Every vector is cut to its first `width` components (None: all of them) and
        has its full norm beside it (`"query_norm"`, `"keys_norms"`, ...); `"width"`
        is the full size of the longest vector, `"shown"` the components kept.
        Masked scores are None. A layer that projects its inputs adds `"x"` (the
        query's input) and `"inputs"` (the keys' and values').
        """
        record = self.record
        vectors = {"query": record.query, "context": record.context}
        matrices = {"keys": record.keys, "values": record.values,
                    "weighted_values": record.weighted_values()}
        if record.query_input is not None:
            vectors["x"] = record.query_input
        if record.key_input is not None:
            matrices["inputs"] = record.key_input
        full = max(array.shape[-1] for array in (*vectors.values(), *matrices.values()))
        shown = full if width is None else min(width, full)
        scores = np.where(record.mask, record.scores, np.inf)
        document = {
            "attention": self.attention, "layer": self.layer, "head": self.head,
            "step": self.step, "score": self.kind.label, "formula": self.formula,
            "query_token": self.query_token, "key_tokens": list(self.key_tokens),
            "scores": [value if math.isfinite(value) else None for value in scores.tolist()],
            "weights": np.asarray(record.weights, "float64").tolist(),
        }
        for name, vector in vectors.items():
            document[name] = np.asarray(vector, "float64")[:shown].tolist()
            document[f"{name}_norm"] = _norm(vector)
        for name, matrix in matrices.items():
            document[name] = np.asarray(matrix, "float64")[:, :shown].tolist()
            document[f"{name}_norms"] = [_norm(row) for row in matrix]
        document.update(width=int(full), shown=int(shown))
        return document


def _sentence(record):
    """The record of a batch of one sentence as NumPy arrays (float64; the mask
    bool), without the batch axis, a heads axis first on every per-head part."""
    heads = len(record.scores.shape) == 4

    def convert(name, part):
        array = np.asarray(part)[0]
        array = array.astype(bool) if name == "mask" else array.astype("float64")
        return array if heads or name not in _HEAD_PARTS else array[None]

    return type(record)(*(None if part is None else convert(name, part)
                          for name, part in zip(record._fields, record)))


def trace_attentions(model, source_ids, target_in_ids):
    """Every attention's records of one sentence, as the model computed them.

    Args:
        model: a `Seq2Seq`.
        source_ids: int `(1, S)`, the source as the search read it.
        target_in_ids: int `(1, T)`, `[START] + the output tokens but the last`.

    Returns:
        `{attention: [record per layer]}` for the attentions the model has (names of
        `attncli.attentions`): `layers.AttentionRecord`s of NumPy arrays with no
        batch axis and a heads axis first (one head for a single attention):
        `weights` `(heads, Tq, Tv)`, `query` `(heads, Tq, d)`, ...
    """
    _, maps = model.teacher_forced(source_ids, target_in_ids, return_steps=True)
    return {name: [_sentence(record) for record in records]
            for name, records in maps.items() if records}


def check_attention(model, attention, layer):
    """Refuse an attention the model does not have, or a layer beyond its blocks
    (`ValueError`, naming what there is)."""
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}. "
                         f"Received: attention={attention!r}")
    if attention == "alignment" and model.alignment_layer is None:
        raise ValueError(NO_ALIGNMENT_LAYER)
    if attention == "encoder" and not model.self_attention_encoder:
        raise ValueError("the encoder is recurrent: it has no self-attention")
    if attention == "decoder" and not model.self_attention_decoder:
        raise ValueError("the decoder is recurrent: it has no self-attention")
    if attention == "encoder":
        count = len(model.encoder.blocks)
    elif attention in ("cross", "decoder") and model.self_attention_decoder:
        count = len(model.decoder.blocks)
    else:
        count = 1
    if not 1 <= layer <= count:
        raise ValueError(f"layer {layer} is out of range 1..{count}")


def score_kind(model, attention, layer):
    """The `ScoreKind` of `attention`'s block `layer` (1-based): a recurrent decoder's
    score and alignment as configured, a multi-head or the alignment layer's score."""
    if attention == "alignment":
        return ScoreKind(model.alignment_layer.attention.score_name)
    if attention == "encoder":
        return ScoreKind(model.encoder.blocks[layer - 1].self_attention.score_name)
    if not model.self_attention_decoder:
        config = model.config
        return ScoreKind(config.score, config.alignment,
                         config.window if ALIGNMENTS[config.alignment].local else None)
    block = model.decoder.blocks[layer - 1]
    chosen = block.self_attention if attention == "decoder" else block.cross_attention
    return ScoreKind(chosen.score_name)


def select_step(model, records, attention="cross", layer=1, head=None, step=1,
                query_tokens=None, key_tokens=None):
    """The `AttentionStep` of query `step` (1-based) of `head` (1-based; None: head 1)
    of block `layer` of `attention`, from `trace_attentions`' `records`.

    `query_tokens` and `key_tokens` label the positions (default: their numbers); key
    positions beyond `key_tokens` are left out.

    Raises:
        ValueError: the model has no such attention, layer, head or query.
    """
    check_attention(model, attention, layer)
    record = records[attention][layer - 1]
    heads = record.weights.shape[0]
    if head is not None and not 1 <= head <= heads:
        raise ValueError(f"head {head} is out of range 1..{heads}")
    # A block's `layers.MultiHeadAttention` numbers its steps by head, even with one.
    multi_head = attention == "encoder" or (attention in ("cross", "decoder")
                                            and model.self_attention_decoder)
    return labelled_step(
        record, attention=attention, layer=layer,
        head=(head or 1) if multi_head else None, step=step,
        kind=score_kind(model, attention, layer), query_tokens=query_tokens,
        key_tokens=key_tokens,
    )


def labelled_step(record, *, attention, layer, head, step, kind, query_tokens=None,
                  key_tokens=None):
    """The `AttentionStep` of query `step` (1-based) of `head` (1-based, or None for
    the only one) of a record of one sentence: one with a heads axis first
    (`trace_attentions`'), or a single attention's without one (`score-demo`'s).
    The other arguments are `AttentionStep`'s labels; see `select_step` for the
    tokens."""
    heads = len(record.scores.shape) == 3
    queries, keys = record.scores.shape[-2:]
    if not 1 <= step <= queries:
        raise ValueError(f"step {step} is out of range 1..{queries}")
    shown = keys if key_tokens is None else len(key_tokens)

    def part_of(name, part):
        if heads and name in _HEAD_PARTS:
            part = part[(head or 1) - 1]
        if name in _QUERY_PARTS:
            part = part[step - 1]
        return part[:shown] if name in _KEY_PARTS else part

    return AttentionStep(
        record=type(record)(*(None if part is None else part_of(name, part)
                              for name, part in zip(record._fields, record))),
        attention=attention,
        layer=layer,
        head=head,
        step=step,
        kind=kind,
        query_token=(query_tokens or [str(t + 1) for t in range(queries)])[step - 1],
        key_tokens=list(key_tokens or [str(s + 1) for s in range(shown)]),
    )
