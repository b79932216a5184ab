"""Word alignments read off the attention over a given translation.

From a `Forced` (`attncli.search.forced`: the model's attention over a source and its
given translation) to links `(i, j)`, source word `i`, target word `j`, counted from 0
over the sentences' space-separated words as given.

1. **Which attention** (`AttentionChoice`): the decoder's cross-attention over the source
   of block `layer` (1-based; by default the last; a recurrent decoder has one) and
   `head` (1-based; by default the mean of the heads; a recurrent decoder has one):
   `W` `(target tokens, source tokens)`, row t the attention of the step that emitted
   target token t. Luong et al. 2015 read alignments off it this way; Garg et al. 2019
   ("Jointly learning to align and translate with Transformer models") found the
   penultimate Transformer block's attention closest to word alignments. A model with
   an alignment layer (`attncli.model.alignment_layer`, trained to align) is read
   through it instead, unless the cross-attention is asked for.
2. **The shift** (Chen et al. 2020, "Accurate word alignment induction from neural
   machine translation", shift-att): the step that emits token t has not read it yet;
   the step whose decoder *input* is token t has. With `shift`, token t's row is row
   t + 1 of `W` (the `[END]` step's row serves the last token):

       W'[t] = W[t + 1]

3. **Words** (`attncli.search.alignments`): the tokens are grouped into the words of the
   text as given (`text_words`), and the word weights are

       A[j, i] = (1 / |T_j|) * sum_{t in T_j} sum_{s in S_i} W[t, s]

   the mean over target word j's pieces of the weight its pieces put on source word i's
   pieces. `[END]`, and the other reserved tokens but `[UNK]`, are in no word, so the
   `[END]` row and a source's end token are left out.
4. **Extraction** (`EXTRACTIONS`, chosen by an `Extraction`), ties going to the lowest
   index:
   - `argmax` links each target word to its best source word, `(argmax_i A[j, i], j)`:
     one link per target word, as Luong et al. 2015 do;
   - `mutual-argmax` keeps the argmax links whose target word is also the source word's
     best, `j = argmax_j' A[j', i]`: at most one link per word on either side, the
     "Argmax" of Jalili Sabet et al. 2020 (SimAlign), which reads one matrix both ways
     as two aligners of opposite directions are intersected;
   - `threshold` links every source word with `A[j, i] >= threshold`: none, one or
     several per target word.
"""

# attncli.search.alignments (the word folding) is imported where it is used: it loads
# TensorFlow, and the command line checks an `Extraction` before TensorFlow loads.
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from attncli.attentions import LINKED
from attncli.errors import AttncliError, shown


class ChoiceError(AttncliError):
    """A layer or head the model does not have. The message starts with the parameter's
    name (`layer 3 is out of range: ...`), so a command can prefix its option's dashes."""


class FoldingError(AttncliError):
    """The model's tokens do not spell the words given, so attention cannot be folded
    into them."""


class AttentionChoice(NamedTuple):
    """Which attention the links are read from.

    Attributes:
        layer: the cross-attention block, 1-based; None, the last.
        head: the head, 1-based; None, the mean of the heads.
        shift: read token t's links from row t + 1 (Chen et al. 2020).
        attention: `"cross"` (the decoder's cross-attention), `"alignment"` (the
            alignment layer's), or None: the alignment layer where the model has one.
    """

    layer: int | None = None
    head: int | None = None
    shift: bool = False
    attention: str | None = None


#: The attentions links may be read from: those over the source (`attncli.attentions`).
ATTENTIONS = LINKED


def read_attention(forced, choice):
    """The name of the attention `choice` reads in `forced` (see `AttentionChoice`).

    Raises:
        ChoiceError: the alignment layer asked of a model without one, or a layer or
            head asked of it.
    """
    has_layer = "alignment" in forced.attentions
    name = choice.attention or ("alignment" if has_layer else "cross")
    if name == "alignment" and not has_layer:
        raise ChoiceError("attention alignment: the model has no alignment layer (train "
                          "one with model.alignment_layer: docs/alignment.md); read "
                          "--attention cross")
    if name == "alignment" and (choice.layer, choice.head) != (None, None):
        raise ChoiceError("layer/--head choose within the cross-attention: the alignment "
                          "layer has one layer and one head; add --attention cross to read "
                          "the cross-attention")
    return name


class WordAttention(NamedTuple):
    """The attention of a sentence pair over its words.

    Attributes:
        source_words, target_words: lists of `attncli.search.alignments.Word`, the
            space-separated words as given, each with its token positions.
        weights: float64 `(len(target_words), len(source_words))`, `A` of the module.
    """

    source_words: list
    target_words: list
    weights: np.ndarray


def check_choice(forced, choice):
    """Refuse a `choice` whose layer or head `forced`'s model does not have.

    Raises:
        ChoiceError: `"layer 3 is out of range: ..."` or `"head 9 ..."`.
    """
    layers = forced.attentions[read_attention(forced, choice)]
    if choice.layer is not None and not 1 <= choice.layer <= len(layers):
        raise ChoiceError(f"layer {choice.layer} is out of range: the model's cross-attention "
                          f"has {_counted(len(layers), 'layer')} (1..{len(layers)})")
    heads = layers[(choice.layer or len(layers)) - 1].shape[0]
    if choice.head is not None and not 1 <= choice.head <= heads:
        raise ChoiceError(f"head {choice.head} is out of range: the model's cross-attention "
                          f"has {_counted(heads, 'head')} (1..{heads})")


def _counted(count, noun):
    return f"{count} {noun}{'s' if count != 1 else ''}"


def token_weights(forced, choice):
    """`W` (or `W'` with `choice.shift`) `(len(forced.tokens), len(forced.source_tokens))`:
    the chosen layer's head, or the mean of its heads (see the module)."""
    check_choice(forced, choice)
    layers = forced.attentions[read_attention(forced, choice)]
    heads = layers[(choice.layer or len(layers)) - 1]  # (heads, T, S)
    weights = heads.mean(axis=0) if choice.head is None else heads[choice.head - 1]
    if choice.shift:
        # Row t + 1 for token t; the [END] token, in no word, keeps a row of zeros.
        weights = np.concatenate([weights[1:], np.zeros_like(weights[:1])])
    return weights


def spelt_words(text, token_words, side):
    """`text_words(text, token_words)`, after checking that the token words spell the
    text's words: each token word falls inside one of them and together they cover
    every character (the tokenizer may change characters, as case folding mostly does,
    but not drop or add any, nor read a word as `[UNK]`).

    Raises:
        FoldingError: naming `side` and the first word not spelt.
    """
    from attncli.search.alignments import text_words

    given = text.split()
    ends, end = set(), 0
    for word in token_words:
        end += len(word.text)
        ends.add(end)
    total, end, unspelt = end, 0, None
    for word in given:
        end += len(word)
        if end not in ends:
            unspelt = word
            break
    else:
        if end != total:  # characters past the last word's end: the last word's
            unspelt = given[-1] if given else text
    if unspelt is not None:
        spelt = " ".join(token_word.text for token_word in token_words)
        raise FoldingError(
            f"the model reads the {side}'s word {shown(unspelt, 40)} differently (its "
            f"words: {shown(spelt, 120)}): its tokenizer drops or adds characters or reads "
            "a word as [UNK], so its attention cannot be folded into the words given; "
            "write the text as the model's training data was written"
        )
    return text_words(text, token_words)


def word_attention(forced, levels, choice=AttentionChoice()):
    """The `WordAttention` of one `Forced` under `choice`.

    Args:
        forced: an `attncli.search.forced.Forced`.
        levels: `(source level, target level)` of the model's tokenizers
            (`Tokenizer.level`: word, subword, char, sentencepiece, pretokenized).
        choice: an `AttentionChoice`. Defaults to the last layer, the mean of its heads,
            no shift.

    Raises:
        ChoiceError: a layer or head the model does not have.
        FoldingError: the model's tokens do not spell the words given.
    """
    from attncli.search.alignments import word_weights, words

    source_level, target_level = levels
    source_words = spelt_words(forced.source, words(forced.source_tokens, source_level),
                               "source")
    target_words = spelt_words(forced.reference, words(forced.tokens, target_level), "target")
    weights = word_weights(token_weights(forced, choice), source_words, target_words)
    return WordAttention(source_words, target_words, weights)


def argmax_links(weights, threshold=None):
    """`{(argmax_i A[j, i], j)}`: each target word's best source word (lowest on a tie)."""
    if weights.shape[1] == 0:
        return frozenset()
    return frozenset((int(i), j) for j, i in enumerate(np.argmax(weights, axis=1)))


def mutual_argmax_links(weights, threshold=None):
    """`{(i, j) : i = argmax_i' A[j, i'] and j = argmax_j' A[j', i]}` (lowest on a tie)."""
    if weights.size == 0:
        return frozenset()
    best_target = np.argmax(weights, axis=0)  # of each source word
    return frozenset(link for link in argmax_links(weights) if best_target[link[0]] == link[1])


def threshold_links(weights, threshold):
    """`{(i, j) : A[j, i] >= threshold}`."""
    targets, sources = np.nonzero(weights >= threshold)
    return frozenset(zip(sources.tolist(), targets.tolist()))


class Method(NamedTuple):
    """An extraction of `EXTRACTIONS`: `links(A, threshold)`, and whether it takes a
    threshold."""

    links: Callable
    takes_threshold: bool = False


EXTRACTIONS = {
    "argmax": Method(argmax_links),
    "mutual-argmax": Method(mutual_argmax_links),
    "threshold": Method(threshold_links, takes_threshold=True),
}


@dataclass(frozen=True)
class Extraction:
    """How links are read off word weights `A` (see the module).

    Args:
        method: a name of `EXTRACTIONS`. Defaults to `"argmax"`.
        threshold: the least weight of a link, in `(0, 1]`, given exactly to the methods
            that take one (`threshold`).

    Raises:
        ValueError: an unknown method, or a threshold missing, out of range or given to
            a method that does not take one.
    """

    method: str = "argmax"
    threshold: float | None = None

    def __post_init__(self):
        if self.method not in EXTRACTIONS:
            raise ValueError(f"unknown extraction {shown(self.method)}; choose one of "
                             f"{', '.join(EXTRACTIONS)}")
        if EXTRACTIONS[self.method].takes_threshold != (self.threshold is not None):
            raise ValueError("a threshold goes with the extractions that take one "
                             f"({', '.join(threshold_methods())}), and only with them. "
                             f"Received: method={self.method}, threshold={self.threshold}")
        if self.threshold is not None and not 0 < self.threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1]. Received: "
                             f"threshold={self.threshold}")

    def links(self, weights):
        """The links `frozenset{(i, j)}` of word weights `(target words, source words)`."""
        return EXTRACTIONS[self.method].links(np.asarray(weights), self.threshold)


def threshold_methods():
    """The names of `EXTRACTIONS` that take a threshold."""
    return [name for name, method in EXTRACTIONS.items() if method.takes_threshold]


def forced_links(forced, levels, choice, extraction):
    """`(WordAttention, links)` of one `Forced`: its word weights and the links
    `extraction` reads off them."""
    attention = word_attention(forced, levels, choice)
    return attention, extraction.links(attention.weights)
