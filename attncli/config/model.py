"""The hyperparameters of the encoder-decoder, validated when they are set.

No TensorFlow here: a configuration can be read and checked before the model is built.
"""

import dataclasses
from typing import Literal

from attncli.config.schema import check_choices
from attncli.scores import ALIGNMENTS, LOCAL_SCORES, SCORES, AlignmentName, ScoreName


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Sizes and choices of the attentional RNN encoder-decoder.

    The defaults are sized like the TensorFlow tutorial "Neural machine translation
    with attention": embeddings of 256, 256 units, one bidirectional GRU layer whose
    directions are summed.

    Args:
        source_vocab_size: int, number of source ids (pad = 0 included).
        target_vocab_size: int, number of target ids (pad = 0 included).
        embedding_dim: int, size of both embeddings. Defaults to 256.
        units: int, size of every recurrent state. Defaults to 256.
        cell: `"gru"` or `"lstm"`, the recurrent cell of encoder and decoder.
            Defaults to `"gru"`.
        encoder_layers: int >= 1, stacked encoder layers. Defaults to 1.
        bidirectional: bool, whether every encoder layer reads both ways.
            Defaults to True.
        merge_mode: `"sum"` or `"concat"`, how the two directions combine (outputs
            and final states). With `"concat"` the encoder's outputs have
            `2 * units` features. Defaults to `"sum"`.
        bridge: how the encoder's final state becomes the decoder's initial state:
            `"dense"` (`s_0 = tanh(W h_final + b)`, per state tensor), `"zeros"`, or
            `"copy"` (needs the final state to have `units` features). Defaults to
            `"dense"`.
        decoder: `"bahdanau"` (query = previous decoder state, context fed to the
            RNN with the input embedding) or `"luong"` (RNN first, its output is the
            query, `h~ = tanh(W_c [c; h])` feeds the output layer). Defaults to
            `"luong"`.
        score: `"dot"`, `"scaled_dot"`, `"general"`, `"concat"` or `"additive"`
            (`attncli.scores.SCORES`). Defaults to `"general"`.
        alignment: `"global"`, `"local-m"` or `"local-p"` (Luong's scores only;
            `attncli.scores.ALIGNMENTS`). Defaults to `"global"`.
        window: int, the half-width D of local attention. Defaults to 10.
        attention_units: int or None, hidden size of the concat and additive
            scores and of local-p's position predictor. Defaults to None (= `units`).
        input_feeding: bool, Luong decoder only: feed `h~_{t-1}` into the next
            input. Defaults to False, so the decoder has no recurrence through
            attention and trains over the whole target at once.
        dropout: float in `[0, 1)`, dropout on embeddings, between encoder layers
            and before the output layer. Defaults to 0.0.
    """

    source_vocab_size: int
    target_vocab_size: int
    embedding_dim: int = 256
    units: int = 256
    cell: Literal["gru", "lstm"] = "gru"
    encoder_layers: int = 1
    bidirectional: bool = True
    merge_mode: Literal["sum", "concat"] = "sum"
    bridge: Literal["dense", "zeros", "copy"] = "dense"
    decoder: Literal["bahdanau", "luong"] = "luong"
    score: ScoreName = "general"
    alignment: AlignmentName = "global"
    window: int = 10
    attention_units: int | None = None
    input_feeding: bool = False
    dropout: float = 0.0

    def __post_init__(self):
        for name in ("source_vocab_size", "target_vocab_size"):
            if getattr(self, name) < 5:
                raise ValueError(
                    f"{name} must be at least 5 (4 reserved ids and one token). "
                    f"Received: {name}={getattr(self, name)}"
                )
        for name in ("embedding_dim", "units", "encoder_layers", "window"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"{name} must be a positive integer. Received: {name}={getattr(self, name)}"
                )
        check_choices(self)
        if self.attention_units is not None and self.attention_units < 1:
            raise ValueError(
                "attention_units must be a positive integer or None. "
                f"Received: attention_units={self.attention_units}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1). Received: dropout={self.dropout}")
        if ALIGNMENTS[self.alignment].local and self.score not in LOCAL_SCORES:
            raise ValueError(
                f"alignment={self.alignment!r} needs one of Luong's scores "
                f"({', '.join(LOCAL_SCORES)}). Received: score={self.score!r}"
            )
        if self.input_feeding and self.decoder != "luong":
            raise ValueError(
                "input_feeding applies to the luong decoder only. "
                f"Received: decoder={self.decoder!r}"
            )
        if SCORES[self.score].same_size and self.memory_dim != self.units:
            raise ValueError(
                f"score={self.score!r} compares the decoder state with the encoder "
                "outputs directly, so they must have the same size; use "
                "merge_mode='sum' or another score. Received: "
                f"units={self.units} and encoder outputs of {self.memory_dim} "
                f"(merge_mode={self.merge_mode!r})"
            )
        if self.bridge == "copy" and self.memory_dim != self.units:
            raise ValueError(
                "bridge='copy' needs the encoder's final state to have the decoder's "
                "size; use bridge='dense'. Received: "
                f"units={self.units} and encoder states of {self.memory_dim} "
                f"(merge_mode={self.merge_mode!r})"
            )

    @property
    def memory_dim(self):
        """Features of each encoder output: `2 * units` for concatenated directions."""
        if self.bidirectional and self.merge_mode == "concat":
            return 2 * self.units
        return self.units

    @property
    def stepwise(self):
        """Whether the decoder has recurrence through attention (must train step by step)."""
        return self.decoder == "bahdanau" or self.input_feeding

    def to_dict(self):
        """The plain dict of every field, e.g. for `get_config` and YAML."""
        return dataclasses.asdict(self)
