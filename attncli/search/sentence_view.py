"""A translated sentence's attention as a view: every attention, layer and head, folded
into words, and any one step (`SentenceView`, which `attncli.search.inspection` makes).

`view.step(...)` is the `AttentionStep` of one query of one head: the record its layer
kept in the teacher-forced pass (`attncli.model.trace`), labelled with the tokens. The
attentions' names and titles are `attncli.attentions`'.

Words. `view.matrix(..., words=True)` folds a matrix of tokens into one of words (Luong
et al. 2015 read alignments off attention the same way), with
`attncli.search.alignments.word_weights`:

    A[j, i] = (1 / |T_j|) * sum_{t in T_j} sum_{s in S_i} W[t, s]

a row word's row is the mean of its pieces' rows, a column word's column the sum of
its pieces' columns (the decoder's self-attention: its columns are its inputs,
`[START]` and each word's pieces one position later). Reserved tokens (`[END]`) are in
no word, so a word row need not sum to 1.

Links. The links of an attention over the source (`attncli.attentions.LINKED`: the
cross-attention and the alignment layer, each its own) are `attncli translate
--alignments`' rule over these words: target word `j` is linked to `argmax_i A[j, i]`
(`word_links`; over the alignment layer's weights this is `attncli align`'s default
reading). A matrix of tokens marks each link on the cells of its pieces, `T_j x S_i`; a
matrix of words on its cell, with the gold links of the sentence pair when given
(`Gold`, over the same words).

`inspect-weights` prints the view, the server sends `view.to_dict()` and `view.step`,
and the offline page embeds `view.steps()`.
"""

from typing import NamedTuple

import numpy as np

from attncli.attentions import LINKED, NO_ALIGNMENT_LAYER, TITLES, choices
from attncli.errors import AttncliError

START_LABEL = "[START]"

#: What a matrix of words says of itself, wherever it is shown.
WORDS_NOTE = ("words: a row word is the mean of its pieces' rows, a column word the sum "
              "of its pieces' columns")


class SelectionError(AttncliError):
    """An attention, layer, head or step the view does not have. The message starts
    with the parameter's name (`layer 3 is out of range: ...`), so a command can
    prefix its option's dashes."""


class Matrix(NamedTuple):
    """One attention matrix with its labels: `weights` `(len(rows), len(columns))`.

    `links`, `sure` and `possible` are the cells `(row, column)` of the extracted links
    and of the sure and possible-only gold links (empty when there are none to show);
    `note` says how a matrix of words was made (`WORDS_NOTE`; "" for tokens)."""

    rows: list
    columns: list
    weights: np.ndarray
    title: str
    row_label: str
    column_label: str
    links: frozenset = frozenset()
    sure: frozenset = frozenset()
    possible: frozenset = frozenset()
    note: str = ""


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


def word_links(weights, target_words):
    """The links `(i, j)` of word weights `(target words, source words)`: target word
    `j` (one with pieces) linked to source word `argmax_i weights[j, i]`, the lowest
    `i` on a tie, as `attncli translate --alignments` links them."""
    if weights.shape[1] == 0:
        return []
    return [(int(np.argmax(row)), j) for j, row in enumerate(weights)
            if target_words[j].positions]


class SentenceView:
    """The attention of one translated sentence; see the module docstring.

    Attributes:
        source: the source text; source_tokens: the tokens the model read.
        hypotheses: the translation's hypotheses, each `{"text", "tokens", "score",
            "token_log_probs"}` (`Hypothesis.token_log_probs`: one per token).
        shown: the index of the hypothesis whose attention this is.
        attentions: `AttentionMatrices` by name, in the order cross, encoder,
            decoder, alignment (the attentions the model has).
        source_words, target_words: lists of `attncli.search.alignments.Word`, the
            source's and the shown hypothesis's words
            (`attncli.search.inspection.sentence_words`).
        reference: a `ReferenceScore` when the hypothesis is a given translation
            (`attncli.search.inspection.inspect_reference`), else None.
    """

    def __init__(self, model, source, source_tokens, hypotheses, shown, attentions,
                 source_ids, target_in_ids, source_words, target_words, reference=None):
        self.model = model
        self.source = source
        self.source_tokens = list(source_tokens)
        self.hypotheses = hypotheses
        self.shown = shown
        self.attentions = attentions
        self.source_words = source_words
        self.target_words = target_words
        self.reference = reference
        self._ids = (source_ids, target_in_ids)
        self._records = None

    @property
    def tokens(self):
        """The output tokens of the hypothesis shown."""
        return self.hypotheses[self.shown]["tokens"]

    @property
    def token_log_probs(self):
        """`log p(y_t | y_<t, x)` of each output token of the hypothesis shown, one per
        row of its cross-attention, `[END]` included (None if not known)."""
        return self.hypotheses[self.shown].get("token_log_probs")

    def attention(self, name):
        """The `AttentionMatrices` of `name`, refused in words if the model has none."""
        if name not in TITLES:
            raise SelectionError(f"attention {name}: choose {choices()}")
        if name == "alignment" and name not in self.attentions:
            raise SelectionError(f"attention alignment: {NO_ALIGNMENT_LAYER}")
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

    def word_axes(self, attention):
        """The words of the rows and of the columns of `attention`'s matrices."""
        if attention == "encoder":
            return self.source_words, self.source_words
        if attention == "decoder":  # its inputs: [START], then each token but the last
            from attncli.search.alignments import Word

            count = len(self.tokens)
            inputs = [Word(word.text, [position + 1 for position in word.positions
                                       if position + 1 < count])
                      for word in self.target_words]
            return self.target_words, [Word(START_LABEL, [0])] + inputs
        return self.target_words, self.source_words  # cross, alignment

    def fold(self, attention, weights):
        """`weights` `(..., rows, columns)` of `attention` over tokens, as words
        `(..., row words, column words)` (the module's rule)."""
        from attncli.search.alignments import word_weights

        rows, columns = self.word_axes(attention)
        weights = np.asarray(weights, "float64")
        if weights.ndim == 2:
            return word_weights(weights, columns, rows)
        return np.stack([self.fold(attention, each) for each in weights])

    def matrix(self, attention="cross", layer=None, head=None, words=False, gold=None):
        """The weights of block `layer` (1-based, None: the last) and `head` (1-based,
        None: the mean over the heads) as a titled `Matrix`; with `words`, folded into
        words. An attention over the source (cross, alignment) carries its links, and
        with `words` the `gold` links (an `attncli.links.Gold`, checked with
        `check_gold`) if given."""
        matrices = self.attention(attention)
        index = self._layer_index(matrices, layer)
        heads = self._check_head(matrices, index, head)
        weights = matrices.layers[index]
        weights = weights.mean(axis=0) if head is None else weights[head - 1]
        title = f"{matrices.title} weights"
        if len(matrices.layers) > 1 or heads > 1:
            title += f" (layer {index + 1} of {len(matrices.layers)}, " + (
                f"head {head} of {heads})" if head is not None else f"mean of {heads} heads)"
            )
        return self.labelled(matrices, weights, title, words, gold)

    def labelled(self, matrices, weights, title, words=False, gold=None):
        """`weights` (tokens) of the `AttentionMatrices` `matrices` as a `Matrix` titled
        `title`, as `matrix` makes it."""
        rows, columns = matrices.rows, matrices.columns
        links = sure = possible = frozenset()
        linked = matrices.attention in LINKED
        if linked or words:
            folded = self.fold(matrices.attention, weights)
        if linked:
            found = word_links(folded, self.target_words)
            if words:
                links = frozenset((j, i) for i, j in found)
            else:  # each link on the cells of its pieces
                links = frozenset(
                    (t, s) for i, j in found for t in self.target_words[j].positions
                    for s in self.source_words[i].positions)
            if words and gold is not None:
                sure = frozenset((j, i) for i, j in gold.sure)
                possible = frozenset((j, i) for i, j in gold.possible - gold.sure)
        if words:
            row_words, column_words = self.word_axes(matrices.attention)
            rows = [word.text for word in row_words]
            columns = [word.text for word in column_words]
            weights = folded
        return Matrix(rows, columns, weights, title, matrices.row_label,
                      matrices.column_label, links, sure, possible,
                      WORDS_NOTE if words else "")

    def check_gold(self, gold, where="gold"):
        """Refuse gold links past the words of the source or of the translation shown
        (`attncli.links.LinkError`, one line)."""
        from attncli.links import check_within

        check_within(gold.possible, len(self.source_words), len(self.target_words), where)

    def check_step(self, attention, step):
        """Refuse a `step` beyond the queries of `attention`."""
        matrices = self.attention(attention)
        count = len(matrices.rows)
        if not 1 <= step <= count:
            if attention == "alignment" or (attention == "cross" and
                                            not self.model.self_attention_decoder):
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
        from attncli.model.trace import select_step, trace_attentions

        matrices = self.attention(attention)
        index = self._layer_index(matrices, layer)
        self._check_head(matrices, index, head)
        self.check_step(attention, step)
        if self._records is None:  # every attention's, from one teacher-forced pass
            self._records = trace_attentions(self.model, *self._ids)
        return select_step(self.model, self._records, attention, index + 1, head, step,
                           matrices.rows, matrices.columns)

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

    def words_dict(self, gold=None):
        """The words view as JSON-safe values: each side's words with the positions of
        their pieces, every attention folded into words (layer by layer, head by head,
        as `to_dict`'s `attentions`), and the `gold` links if given (0-based `[i, j]`,
        `possible` holding the possible links that are not sure)."""
        def listed(words):
            return [{"text": word.text, "positions": list(word.positions)}
                    for word in words]

        result = {
            "note": WORDS_NOTE,
            "source": listed(self.source_words),
            "target": listed(self.target_words),
            "attentions": [],
        }
        for name, matrices in self.attentions.items():
            rows, columns = self.word_axes(name)
            result["attentions"].append({
                "attention": name, "rows": [word.text for word in rows],
                "columns": [word.text for word in columns],
                "layers": [{"heads": self.fold(name, weights).tolist()}
                           for weights in matrices.layers],
            })
        if gold is not None:
            result["gold"] = {"sure": sorted(map(list, gold.sure)),
                              "possible": sorted(map(list, gold.possible - gold.sure))}
        return result

    def to_dict(self, words=False, gold=None):
        """The view as JSON-safe Python values (see the module docstring), with the
        shown hypothesis's `token_log_probs` (one per row of its cross-attention); with
        `words` (or `gold`), its words view under `"words"` (`words_dict`). Each
        attention has its `"title"` and `"linked"`, whether its words carry links
        (`attncli.attentions.LINKED`)."""
        result = {
            "source": self.source,
            "source_tokens": list(self.source_tokens),
            "hypotheses": [dict(hypothesis) for hypothesis in self.hypotheses],
            "shown": self.shown,
            "token_log_probs": self.token_log_probs,
            "attentions": [
                {
                    "attention": name, "title": matrices.title,
                    "linked": name in LINKED,
                    "rows": list(matrices.rows), "columns": list(matrices.columns),
                    "row_label": matrices.row_label,
                    "column_label": matrices.column_label,
                    "layers": [{"heads": np.asarray(weights, "float64").tolist()}
                               for weights in matrices.layers],
                }
                for name, matrices in self.attentions.items()
            ],
        }
        if self.reference is not None:
            result["reference"] = self.reference._asdict()
        if words or gold is not None:
            result["words"] = self.words_dict(gold)
        return result
