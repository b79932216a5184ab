"""A translated sentence's attention: every attention, layer and head, and any one step.

`inspect_sentence(loaded, translator, translation)` gives the `SentenceView` of one
hypothesis: the weights of each attention the model has, as the model computed them
for the tokens the search emitted (a recurrent decoder's: the weights the search
returned; a self-attention side's: `Seq2Seq.attention_maps`, teacher-forced over the
hypothesis, which gives what the search computed), and `view.step(...)`, the
`AttentionStep` record of one query of one head (`Seq2Seq.trace`).

`inspect-weights` prints the view, the server sends `view.to_dict()` and `view.step`,
and the offline page embeds `view.steps()`.
"""

from typing import NamedTuple

import numpy as np

from attncli.errors import AttncliError

START_LABEL = "<start>"

TITLES = {"cross": "cross-attention", "encoder": "encoder self-attention",
          "decoder": "decoder self-attention"}


class SelectionError(AttncliError):
    """An attention, layer, head or step the view does not have. The message starts
    with the parameter's name (`layer 3 is out of range: ...`), so a command can
    prefix its option's dashes."""


class Matrix(NamedTuple):
    """One attention matrix with its labels: `weights` `(len(rows), len(columns))`."""

    rows: list
    columns: list
    weights: np.ndarray
    title: str
    row_label: str
    column_label: str


class AttentionMatrices(NamedTuple):
    """Every layer and head of one attention of the sentence.

    `layers[l]` is `(heads, len(rows), len(columns))`: row t holds query t's weights
    over the columns, and sums to 1 (local-p: at most 1)."""

    attention: str
    rows: list
    columns: list
    row_label: str
    column_label: str
    layers: list

    @property
    def title(self):
        return TITLES[self.attention]


class SentenceView:
    """The attention of one translated sentence; see the module docstring.

    Attributes:
        source: the source text; source_tokens: the tokens the model read.
        hypotheses: the translation's hypotheses, each `{"text", "tokens", "score"}`.
        shown: the index of the hypothesis whose attention this is.
        attentions: `AttentionMatrices` by name, in the order cross, encoder, decoder
            (the attentions the model has).
    """

    def __init__(self, model, source, source_tokens, hypotheses, shown, attentions,
                 source_ids, target_in_ids):
        self.model = model
        self.source = source
        self.source_tokens = list(source_tokens)
        self.hypotheses = hypotheses
        self.shown = shown
        self.attentions = attentions
        self._ids = (source_ids, target_in_ids)
        self._traces = {}

    @property
    def tokens(self):
        """The output tokens of the hypothesis shown."""
        return self.hypotheses[self.shown]["tokens"]

    def attention(self, name):
        """The `AttentionMatrices` of `name`, refused in words if the model has none."""
        if name not in TITLES:
            raise SelectionError(f"attention {name}: choose cross, encoder or decoder")
        if name not in self.attentions:
            side = "encoder" if name == "encoder" else "decoder"
            raise SelectionError(
                f"attention {name}: this model's {side} is recurrent and has no "
                "self-attention; choose cross"
            )
        return self.attentions[name]

    def _layer_index(self, matrices, layer):
        count = len(matrices.layers)
        if layer is not None and not 1 <= layer <= count:
            raise SelectionError(
                f"layer {layer} is out of range: the {matrices.attention} attention has "
                f"{count} layer{'s' if count > 1 else ''} (1..{count})"
            )
        return (layer or count) - 1

    def _check_head(self, matrices, index, head):
        heads = matrices.layers[index].shape[0]
        if head is not None and not 1 <= head <= heads:
            raise SelectionError(
                f"head {head} is out of range: the {matrices.attention} attention has "
                f"{heads} head{'s' if heads > 1 else ''} (1..{heads})"
            )
        return heads

    def matrix(self, attention="cross", layer=None, head=None):
        """The weights of block `layer` (1-based, None: the last) and `head` (1-based,
        None: the mean over the heads) as a titled `Matrix`."""
        matrices = self.attention(attention)
        index = self._layer_index(matrices, layer)
        heads = self._check_head(matrices, index, head)
        weights = matrices.layers[index]
        weights = weights.mean(axis=0) if head is None else weights[head - 1]
        shown = f"layer {index + 1} of {len(matrices.layers)}, " + (
            f"head {head} of {heads}" if head is not None else f"mean of {heads} heads"
        )
        return Matrix(matrices.rows, matrices.columns, weights,
                      f"{matrices.title} weights ({shown})", matrices.row_label,
                      matrices.column_label)

    def check_step(self, attention, step):
        """Refuse a `step` beyond the queries of `attention`."""
        matrices = self.attention(attention)
        count = len(matrices.rows)
        if not 1 <= step <= count:
            if attention == "cross" and not self.model.self_attention_decoder:
                raise SelectionError(
                    f"step {step} is out of range: the translation has {count} output "
                    f"tokens (1..{count})"
                )
            raise SelectionError(
                f"step {step} is out of range: the {attention} attention has {count} "
                f"queries (1..{count})"
            )

    def step(self, attention="cross", layer=None, head=None, step=1):
        """The `AttentionStep` of query `step` (1-based) of `head` (None: head 1) of
        block `layer` (None: the last) of `attention`, labelled with its tokens."""
        matrices = self.attention(attention)
        index = self._layer_index(matrices, layer)
        self._check_head(matrices, index, head)
        self.check_step(attention, step)
        return self._trace(attention, index + 1).step(head, step, matrices.rows,
                                                      matrices.columns)

    def _trace(self, attention, layer):
        from attncli.model.trace import trace_attention

        key = (attention, layer)
        if key not in self._traces:
            self._traces[key] = trace_attention(self.model, *self._ids, attention, layer)
        return self._traces[key]

    def steps(self, width=8):
        """Every step of every attention, layer and head, as `to_dict(width)`, by
        `"attention/layer/head/step"` (head 1 for a single-head attention)."""
        result = {}
        for name, matrices in self.attentions.items():
            for index, weights in enumerate(matrices.layers):
                for head in range(1, weights.shape[0] + 1):
                    for step in range(1, len(matrices.rows) + 1):
                        record = self.step(name, index + 1, head, step)
                        result[f"{name}/{index + 1}/{head}/{step}"] = record.to_dict(width)
        return result

    def to_dict(self):
        """The view as JSON-safe Python values (see the module docstring)."""
        return {
            "source": self.source,
            "source_tokens": list(self.source_tokens),
            "hypotheses": [dict(hypothesis) for hypothesis in self.hypotheses],
            "shown": self.shown,
            "attentions": [
                {
                    "attention": name, "title": matrices.title,
                    "rows": list(matrices.rows), "columns": list(matrices.columns),
                    "row_label": matrices.row_label,
                    "column_label": matrices.column_label,
                    "layers": [{"heads": np.asarray(weights, "float64").tolist()}
                               for weights in matrices.layers],
                }
                for name, matrices in self.attentions.items()
            ],
        }


def inspect_sentence(loaded, translator, translation, hypothesis=0):
    """The `SentenceView` of `translation.hypotheses[hypothesis]`.

    Args:
        loaded: the loaded model (`.model`, `.target_tokenizer`).
        translator: the `Translator` that translated it (its source ids).
        translation: a `Translation` with attention weights.
        hypothesis: int, which hypothesis to show. Defaults to 0, the best.
    """
    import tensorflow as tf

    from attncli.data.vocabulary import START

    model = loaded.model
    chosen = translation.hypotheses[hypothesis]
    tokens = list(chosen.tokens)
    source_tokens = list(translation.source_tokens)
    _, source_ids = translator.source_ids(tf.constant([translation.source]))
    vocabulary = loaded.target_tokenizer.vocabulary
    emitted = [vocabulary.id_of(token) for token in tokens]
    target_in_ids = tf.constant([[START] + emitted[:-1]], tf.int32)
    decoder_inputs = [START_LABEL] + tokens[:-1]
    maps = {"encoder": [], "decoder": [], "cross": []}
    if model.self_attention_encoder or model.self_attention_decoder:
        maps = model.attention_maps(source_ids, target_in_ids)
    rows = len(tokens)

    def layers(name, height, width):
        return [np.asarray(weights)[0, :, :height, :width] for weights in maps[name]]

    attentions = {}
    if model.self_attention_decoder:
        cross = layers("cross", rows, len(source_tokens))
    else:  # the weights the search returned, as one layer of one head
        cross = [np.asarray(chosen.weights)[None, :rows, : len(source_tokens)]]
    attentions["cross"] = AttentionMatrices("cross", tokens, source_tokens, "output",
                                            "source", cross)
    if maps["encoder"]:
        attentions["encoder"] = AttentionMatrices(
            "encoder", source_tokens, source_tokens, "source", "source",
            layers("encoder", len(source_tokens), len(source_tokens)))
    if maps["decoder"]:
        attentions["decoder"] = AttentionMatrices(
            "decoder", tokens, decoder_inputs, "output", "decoder input",
            layers("decoder", rows, rows))
    hypotheses = [
        {"text": each.text, "tokens": list(each.tokens), "score": float(each.score)}
        for each in translation.hypotheses
    ]
    return SentenceView(model, translation.source, source_tokens, hypotheses, hypothesis,
                        attentions, source_ids, target_in_ids)
