"""The `sentencepiece` tokenizer level: SentencePiece pieces, learned or given.

Pieces (`▁` marks a piece that starts after a space) are cut and joined by
`text.SentencepieceTokenizer`, from a unigram or BPE model learned from training text
by the `sentencepiece` library (`learn_sentencepiece`), or from a `.model` file given.
A learned model keeps every character and space as written (identity normaliser, spaces
not collapsed, unseen characters as UTF-8 byte pieces), so joining gives the normalised
text back exactly. The model's ids are the vocabulary's (`sentencepiece_vocabulary`).
"""

from __future__ import annotations

import hashlib
import io
import os
import re

import sentencepiece
import tensorflow as tf
import tensorflow_text as text
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer

from attncli.data.levels import Level, registered
from attncli.data.quiet_stderr import quiet_stderr
from attncli.data.vocabulary import (
    END, END_TOKEN, PAD, PAD_TOKEN, RESERVED_TOKENS, START, START_TOKEN, UNK, UNK_TOKEN, Vocabulary,
)
from attncli.errors import DataError, clipped


@registered
class SentencepieceLevel(Level):
    """`sentencepiece`: the pieces of the tokenizer's SentencePiece model, which
    `learn` learns from the training text unless the tokenizer was given one; the
    tokenizer keeps the model it learned. Its normalisation keeps the spaces inside a
    text (SentencePiece reads them)."""

    name = "sentencepiece"
    keeps_spaces = True

    def __init__(self, tokenizer):
        self._sentencepiece = None
        if tokenizer.sentencepiece_model is not None:
            # The op logs one line of its own on stderr when a model has no normalisation
            # rule (the identity one learned models have): not for the user to read.
            with quiet_stderr(), tf.init_scope():
                self._sentencepiece = _SentencepieceTokenizer(tokenizer.sentencepiece_model)

    @property
    def trackables(self):
        return () if self._sentencepiece is None else (self._sentencepiece,)

    def split(self, normalized):
        return self._require_model("tokenize").tokenize(normalized)

    def join(self, tokens):
        return self._require_model("detokenize").detokenize(tokens)

    def learn(self, tokenizer, texts, max_size, min_count, chunk_size):
        """The pieces of the tokenizer's model, learned first from `texts` (at most
        `max_size` pieces, the reserved ones included; `min_count` does not apply)
        unless it has one."""
        if tokenizer.sentencepiece_model is None:
            if max_size is None:
                raise DataError("a sentencepiece vocabulary needs a maximum size (vocab_size)")
            normalized = []
            for start in range(0, len(texts), chunk_size):
                chunk = tokenizer.normalize(tf.constant(list(texts[start : start + chunk_size])))
                normalized.extend(line.decode("utf-8") for line in chunk.numpy())
            tokenizer.sentencepiece_model = learn_sentencepiece(
                normalized, tokenizer.sentencepiece_type, max_size
            )
        return sentencepiece_vocabulary(tokenizer.sentencepiece_model)

    def _require_model(self, action: str):
        if self._sentencepiece is None:
            raise DataError(
                f"the sentencepiece tokenizer needs its model and vocabulary to {action} "
                "(build_vocabulary, then with_vocabulary)"
            )
        return self._sentencepiece


def learn_sentencepiece(lines, model_type, vocab_size) -> bytes:
    """A SentencePiece model of type `model_type` (`"unigram"` or `"bpe"`) and at most
    `vocab_size` pieces, learned from the normalised strings `lines` (blank ones skipped).

    Raises:
        DataError: one line saying why the library could not, and what to change.
    """
    model = io.BytesIO()
    try:
        with quiet_stderr():
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=iter([line for line in lines if line.strip()]),
                model_writer=model,
                model_type=model_type,
                vocab_size=vocab_size,
                # A smaller corpus gives a smaller vocabulary rather than an error.
                hard_vocab_limit=False,
                # Text comes back exactly: no normalisation of its own (attncli's
                # runs before), spaces kept as written, every character a piece, and
                # a character never seen in training spelt as its UTF-8 bytes.
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                character_coverage=1.0,
                byte_fallback=True,
                # The reserved tokens get attncli's names and ids: the model's ids
                # are the vocabulary's.
                pad_id=PAD, unk_id=UNK, bos_id=START, eos_id=END,
                pad_piece=PAD_TOKEN, unk_piece=UNK_TOKEN, bos_piece=START_TOKEN,
                eos_piece=END_TOKEN, unk_surface=UNK_TOKEN,
                num_threads=os.cpu_count() or 1,
                minloglevel=2,
            )
    except RuntimeError as error:
        cannot = (f"SentencePiece cannot learn a {model_type} model of "
                  f"vocab_size={vocab_size} from this text")
        # Its floor, as it states it: "Vocabulary size is smaller than required_chars.
        # 300 vs 371." (its reserved and byte pieces, then every character of the text).
        floor = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(error))
        if floor:
            raise DataError(
                f"{cannot}: it needs at least {floor[1]} pieces here (its 256 byte pieces, "
                "the 4 reserved tokens and every character of the text); raise vocab_size "
                f"to {floor[1]} or more"
            ) from None
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else "failed"
        raise DataError(f"{cannot} ({clipped(reason)}); change vocab_size") from None
    return model.getvalue()


def sentencepiece_vocabulary(model: bytes) -> Vocabulary:
    """The `Vocabulary` of a SentencePiece model: the 4 reserved tokens, then every piece
    of the model that is neither a control symbol nor its unknown piece, in the model's
    order. A model attncli learned has the reserved tokens as its first 4 pieces, so
    its ids are the vocabulary's."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    pieces = [
        processor.id_to_piece(index) for index in range(processor.get_piece_size())
        if not (processor.is_control(index) or processor.is_unknown(index))
    ]
    return Vocabulary(list(RESERVED_TOKENS) + [p for p in pieces if p not in RESERVED_TOKENS])


class _SentencepieceModel(tf.saved_model.experimental.TrackableResource):
    """A SentencePiece model as a TensorFlow resource named after its content.

    tensorflow-text names its own by a counter of the graph that creates it
    (`_0_SentencepieceOp`): a SavedModel restores the source's and the target's under that
    one name, and the second side then runs the first side's model (measured: the target
    tokenized with the source's pieces). Named by the model's SHA-256, two models never
    share a resource, and the same model may.
    """

    def __init__(self, model: bytes):
        super().__init__()
        self._model = model
        self._shared_name = "attncli_sentencepiece_" + hashlib.sha256(model).hexdigest()
        _ = self.resource_handle  # created now, as tensorflow-text's own is

    def _create_resource(self):
        return gen_sentencepiece_tokenizer.sentencepiece_op(
            model=self._model, shared_name=self._shared_name
        )


class _SentencepieceTokenizer(text.SentencepieceTokenizer):
    """tensorflow-text's tokenizer (pieces as strings) on a `_SentencepieceModel`."""

    def __init__(self, model: bytes):
        super().__init__(model, out_type=tf.string)
        self._model_resource = _SentencepieceModel(model)
