"""The hyperparameters of the encoder-decoder, validated when they are set.

No TensorFlow here: a configuration can be read and checked before the model is built.
"""

import dataclasses
from typing import Literal

from attncli.config.schema import check_choices
from attncli.scores import ALIGNMENTS, LOCAL_SCORES, SCORES, AlignmentName, ScoreName


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    """Sizes and choices of the encoder-decoder, each side recurrent or self-attention
    (the encoder also both, in cascade): the `model:` section of a run, validated when
    it is read.

    The vocabulary sizes are not among them: they are facts of the data, learned with
    the vocabularies, and `sized` joins them to these settings in a `ModelConfig`.

    The defaults are sized like the TensorFlow tutorial "Neural machine translation
    with attention": embeddings of 256, 256 units, one bidirectional GRU layer whose
    directions are summed.

    Args:
        embedding_dim: int, size of both embeddings. Defaults to 256.
        units: int, size of every recurrent state. Defaults to 256.
        cell: `"gru"` or `"lstm"`, the recurrent cell of encoder and decoder.
            Defaults to `"gru"`.
        encoder: `"rnn"` (recurrent layers), `"self-attention"` (Vaswani et
            al. 2017: positional embedding, then blocks of multi-head
            self-attention and a feed-forward network, of size `embedding_dim`)
            or `"cascade"` (Chen et al. 2018: the recurrent layers, then
            `encoder_blocks` self-attention blocks on their outputs, with no
            position encoding; their outputs `r` of R features, R = `2 * units`
            with `merge_mode: concat` else `units`, enter the blocks as
            `x_0 = W_p r + b_p` of `embedding_dim` when R != `embedding_dim`, as
            `r` otherwise). A self-attention
            encoder has no final state: an RNN decoder starts from the mean of
            its outputs over the real positions, through the bridge; a cascade's
            decoder starts from its recurrent layers' final state, as under
            `"rnn"`, and attends over its blocks' outputs. Defaults to `"rnn"`.
        encoder_layers: int >= 1, stacked encoder layers (recurrent layers; the
            self-attention encoder's blocks). Defaults to 1.
        encoder_blocks: int >= 1, the cascade encoder's self-attention blocks
            above its `encoder_layers` recurrent layers (they take `heads`,
            `feed_forward_dim`, `activation`, `norm`, `dropout` and
            `attention_dropout` like every block). The other encoders have none.
            Defaults to 1.
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
            RNN with the input embedding), `"luong"` (RNN first, its output is the
            query, `h~ = tanh(W_c [c; h])` feeds the output layer) or
            `"self-attention"` (blocks of causal self-attention, cross-attention
            over the encoder's outputs with `score` and `heads`, and a
            feed-forward network, of size `embedding_dim`). Defaults to `"luong"`.
        decoder_layers: int >= 1, the self-attention decoder's blocks; the RNN
            decoders have one layer. Defaults to 1.
        score: `"dot"`, `"scaled_dot"`, `"general"`, `"concat"` or `"additive"`
            (`attncli.scores.SCORES`), the score of the decoder's attention over
            the encoder (the self-attention decoder's cross-attention). Defaults
            to `"general"`.
        alignment: `"global"`, `"local-m"` or `"local-p"` (Luong's scores only;
            `attncli.scores.ALIGNMENTS`). Defaults to `"global"`.
        window: int, the half-width D of local attention. Defaults to 10.
        attention_units: int or None, hidden size of the concat and additive
            scores and of local-p's position predictor. Defaults to None (= `units`).
        input_feeding: bool, Luong decoder only: feed `h~_{t-1}` into the next
            input. Defaults to False, so the decoder has no recurrence through
            attention and trains over the whole target at once.
        dropout: float in `[0, 1)`, dropout on embeddings, between encoder layers
            and before the output layer; in self-attention blocks on every
            sublayer's output before the residual sum. Defaults to 0.0.
        heads: int >= 1, attention heads of the self-attention blocks (self- and
            cross-attention); must divide `embedding_dim`. Defaults to 4.
        feed_forward_dim: int or None, the inner size of the blocks' feed-forward
            networks. Defaults to None (= `4 * embedding_dim`).
        activation: `"relu"` or `"gelu"`, the feed-forward networks' activation.
            Defaults to `"relu"`.
        norm: `"pre"` (`x + f(LayerNorm(x))`, a final LayerNorm after the last
            block) or `"post"` (`LayerNorm(x + f(x))`, as Vaswani et al.).
            Defaults to `"pre"`.
        position_encoding: `"sinusoidal"` or `"learned"`, added to the
            self-attention sides' scaled embeddings (not to a cascade's blocks,
            whose order comes from its recurrent layers). Defaults to
            `"sinusoidal"`.
        max_positions: int >= 1, the rows of the learned position table
            (positions past it share its last row). Defaults to 256.
        attention_dropout: float in `[0, 1)`, dropout on the self-attention
            blocks' attention weights. Defaults to 0.0.
        encoder_norm_gain: float > 0, the initial gain `gamma` of the final
            LayerNorm of a self-attention or cascade encoder with `norm: pre`,
            learned from there. The encoder's outputs start with norm
            `gain * sqrt(embedding_dim)` per position: 16 at 256 with the
            default 1.0, where a fresh recurrent encoder's are near 0.3. An RNN
            decoder reads them unnormalised (its scores, its `tanh` layers), and
            `1 / sqrt(embedding_dim)` (unit norm) lets it learn faster at first
            (docs/model.md). Defaults to 1.0.
        tie_embeddings: `"none"`, `"target"` (the output layer's weight is the
            target embedding matrix: `logits = features E^T + b`, Press & Wolf
            2017; Vaswani et al. 2017, section 3.4) or `"all"` (the source
            embedding is that matrix too: needs one vocabulary for both sides,
            `data.shared_vocab`). An RNN decoder's features have `units`
            values, so tying needs `units = embedding_dim`. Defaults to `"none"`.
        alignment_layer: bool, add an alignment layer (after Garg et al. 2019's,
            `attncli.model.alignment_layer`): an attention over the encoder's
            outputs whose query reads the target token itself and the decoder
            around it, trained by guided alignment alone (`training.guided_alignment`,
            which it needs) and read by `attncli align`. Translation never uses it.
            Defaults to False.
        alignment_context: what the alignment layer's query reads: `"next"` (the
            decoder's step that emits `y_t`, the next one, and `y_t`'s embedding) or
            `"full"` (those and a bidirectional GRU over the whole target, Garg et
            al. 2019's full context). Defaults to `"next"`.
    """

    embedding_dim: int = 256
    units: int = 256
    cell: Literal["gru", "lstm"] = "gru"
    encoder: Literal["rnn", "self-attention", "cascade"] = "rnn"
    encoder_layers: int = 1
    encoder_blocks: int = 1
    bidirectional: bool = True
    merge_mode: Literal["sum", "concat"] = "sum"
    bridge: Literal["dense", "zeros", "copy"] = "dense"
    decoder: Literal["bahdanau", "luong", "self-attention"] = "luong"
    decoder_layers: int = 1
    score: ScoreName = "general"
    alignment: AlignmentName = "global"
    window: int = 10
    attention_units: int | None = None
    input_feeding: bool = False
    dropout: float = 0.0
    heads: int = 4
    feed_forward_dim: int | None = None
    activation: Literal["relu", "gelu"] = "relu"
    norm: Literal["pre", "post"] = "pre"
    position_encoding: Literal["sinusoidal", "learned"] = "sinusoidal"
    max_positions: int = 256
    attention_dropout: float = 0.0
    encoder_norm_gain: float = 1.0
    tie_embeddings: Literal["none", "target", "all"] = "none"
    alignment_layer: bool = False
    alignment_context: Literal["next", "full"] = "next"

    def __post_init__(self):
        for name in ("embedding_dim", "units", "encoder_layers", "encoder_blocks",
                     "decoder_layers", "window", "heads", "max_positions"):
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
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(
                    f"{name} must be in [0, 1). Received: {name}={getattr(self, name)}"
                )
        self._check_self_attention()
        self._check_encoder_norm_gain()
        self._check_tied_embeddings()
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
        if (SCORES[self.score].same_size and self.decoder != "self-attention"
                and self.memory_dim != self.units):
            raise ValueError(
                f"score={self.score!r} compares the decoder state with the encoder "
                "outputs directly, so they must have the same size; use "
                "merge_mode='sum' (with a self-attention or cascade encoder, "
                "embedding_dim = units) or another score. Received: "
                f"units={self.units} and encoder outputs of {self.memory_dim} "
                f"(merge_mode={self.merge_mode!r})"
            )
        if (self.bridge == "copy" and self.decoder != "self-attention"
                and self.final_state_dim != self.units):
            raise ValueError(
                "bridge='copy' needs the encoder's final state to have the decoder's "
                "size; use bridge='dense'. Received: "
                f"units={self.units} and encoder states of {self.final_state_dim} "
                f"(merge_mode={self.merge_mode!r})"
            )

    def _check_self_attention(self):
        if self.feed_forward_dim is not None and self.feed_forward_dim < 1:
            raise ValueError(
                "feed_forward_dim must be a positive integer or None. "
                f"Received: feed_forward_dim={self.feed_forward_dim}"
            )
        if ((self.self_attention_encoder or self.decoder == "self-attention")
                and self.embedding_dim % self.heads):
            raise ValueError(
                f"heads must divide embedding_dim, the size of the self-attention blocks "
                f"({self.embedding_dim}). Received: heads={self.heads}"
            )
        if self.encoder != "cascade" and self.encoder_blocks != 1:
            raise ValueError(
                f"encoder_blocks applies to the cascade encoder; the {self.encoder} "
                "encoder's layers are encoder_layers. "
                f"Received: encoder_blocks={self.encoder_blocks}"
            )
        if self.decoder != "self-attention" and self.decoder_layers != 1:
            raise ValueError(
                f"decoder_layers applies to the self-attention decoder; the {self.decoder} "
                f"decoder has one layer. Received: decoder_layers={self.decoder_layers}"
            )
        if self.decoder == "self-attention" and ALIGNMENTS[self.alignment].local:
            raise ValueError(
                "the self-attention decoder's cross-attention is global. "
                f"Received: alignment={self.alignment!r}"
            )

    def _check_encoder_norm_gain(self):
        if not self.encoder_norm_gain > 0:
            raise ValueError(
                "encoder_norm_gain must be a positive number. "
                f"Received: encoder_norm_gain={self.encoder_norm_gain}"
            )
        if self.encoder_norm_gain != 1.0 and not (self.self_attention_encoder
                                                  and self.norm == "pre"):
            raise ValueError(
                "encoder_norm_gain sets the gain of the final LayerNorm of a "
                "self-attention or cascade encoder with norm: pre; this encoder has "
                f"none. Received: encoder={self.encoder!r}, norm={self.norm!r}, "
                f"encoder_norm_gain={self.encoder_norm_gain}"
            )

    def _check_tied_embeddings(self):
        if self.tie_embeddings == "none":
            return
        if self.decoder != "self-attention" and self.units != self.embedding_dim:
            raise ValueError(
                f"tie_embeddings={self.tie_embeddings!r} makes the target embedding matrix "
                f"the output layer's weight, which reads the {self.decoder} decoder's "
                "features of `units` values: make units and embedding_dim equal. "
                f"Received: units={self.units}, embedding_dim={self.embedding_dim}"
            )

    @property
    def model_dim(self):
        """The size of the self-attention blocks' inputs and outputs: `embedding_dim`."""
        return self.embedding_dim

    @property
    def inner_dim(self):
        """The feed-forward networks' inner size: `feed_forward_dim` or `4 * embedding_dim`."""
        return self.feed_forward_dim or 4 * self.embedding_dim

    @property
    def self_attention_encoder(self):
        """Whether the encoder has self-attention blocks (`self-attention`, `cascade`)."""
        return self.encoder in ("self-attention", "cascade")

    @property
    def recurrent_dim(self):
        """Features of each recurrent encoder output and of its final state: `2 * units`
        for concatenated directions, else `units`."""
        if self.bidirectional and self.merge_mode == "concat":
            return 2 * self.units
        return self.units

    @property
    def memory_dim(self):
        """Features of each encoder output, the annotations the decoder attends over:
        `embedding_dim` for a self-attention or cascade encoder, else `recurrent_dim`."""
        return self.model_dim if self.self_attention_encoder else self.recurrent_dim

    @property
    def final_state_dim(self):
        """Features of the encoder's final state, which the bridge reads: `embedding_dim`
        for a self-attention encoder (the mean of its outputs), else `recurrent_dim`."""
        return self.model_dim if self.encoder == "self-attention" else self.recurrent_dim

    @property
    def stepwise(self):
        """Whether the decoder has recurrence through attention (must train step by step)."""
        return self.decoder == "bahdanau" or self.input_feeding

    def to_dict(self):
        """The plain dict of every field, e.g. for `get_config` and YAML."""
        return dataclasses.asdict(self)

    def sized(self, source_vocab_size, target_vocab_size):
        """The `ModelConfig` of these settings for vocabularies of the given sizes."""
        return ModelConfig(
            **self.to_dict(),
            source_vocab_size=source_vocab_size,
            target_vocab_size=target_vocab_size,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig(ModelSettings):
    """`ModelSettings` with the vocabulary sizes: what `Seq2Seq` is built from.

    Args:
        source_vocab_size: int >= 5, number of source ids (pad = 0 included).
        target_vocab_size: int >= 5, number of target ids (pad = 0 included).
        Every argument of `ModelSettings`, by keyword.
    """

    source_vocab_size: int
    target_vocab_size: int

    def __post_init__(self):
        for name in ("source_vocab_size", "target_vocab_size"):
            if getattr(self, name) < 5:
                raise ValueError(
                    f"{name} must be at least 5 (4 reserved ids and one token). "
                    f"Received: {name}={getattr(self, name)}"
                )
        super().__post_init__()
        if self.tie_embeddings == "all" and self.source_vocab_size != self.target_vocab_size:
            raise ValueError(
                "tie_embeddings='all' gives both sides one embedding matrix, which needs one "
                "vocabulary (data.shared_vocab: true). Received: "
                f"source_vocab_size={self.source_vocab_size}, "
                f"target_vocab_size={self.target_vocab_size}"
            )
