"""The attentional encoder-decoder: each side recurrent (Bahdanau et al. 2015; Luong et
al. 2015) or self-attention (Vaswani et al. 2017), the encoder also both in cascade (Chen
et al. 2018)."""

import keras
from keras import ops

from attncli.config.model import ModelConfig
from attncli.model.alignment_layer import AlignmentLayer
from attncli.model.cascade_encoder import CascadeEncoder
from attncli.model.decoder import BahdanauDecoder, LuongDecoder
from attncli.model.encoder import Encoder
from attncli.model.transformer_decoder import TransformerDecoder
from attncli.model.transformer_encoder import TransformerEncoder


@keras.saving.register_keras_serializable(package="attncli")
class Seq2Seq(keras.Model):
    """Encoder, bridge and attentional decoder, trained with teacher forcing.

        h_1 .. h_S, h_final = Encoder(x)
        s_0 = bridge(h_final)             dense: tanh(W_b h_final + b_b); zeros; copy
        logits_t = Decoder(y_{<t}, s_0, h_1 .. h_S)

    `config.encoder` picks the recurrent `Encoder`, the `TransformerEncoder`,
    whose `h_final` is the mean of its outputs over the real positions (it has no
    recurrent state), or the `CascadeEncoder` (the recurrent layers, then
    self-attention blocks: `h` its blocks' outputs, `h_final` its recurrent layers'
    final state); `config.decoder` picks `BahdanauDecoder`, `LuongDecoder` or
    the `TransformerDecoder`, which needs no bridge (its state is its cache of
    keys and values, empty at the start). Every combination trains.

    `config.tie_embeddings` ties the embeddings (Press & Wolf 2017; Vaswani et al.
    2017, section 3.4): `"target"` makes the decoder's output layer read the target
    embedding matrix E, `logits = E features + b` (`TiedOutputProjection`); `"all"`
    makes one matrix, `shared_embedding`, the source embedding, the target
    embedding and the output weight. A self-attention side embeds `sqrt(d) E[w] +
    PE`, an RNN side `E[w]`; the logits use E unscaled. Tied, the matrix is one
    variable, updated by the sum of the gradients of all its uses.

    `config.alignment_layer` adds an `AlignmentLayer`, an attention over the source
    trained by guided alignment alone and read by `attncli align` (its weights are the
    maps' `"alignment"`); translation never calls it.

    All weights exist as soon as the model is constructed.

    Args:
        config: a `ModelConfig`, or the dict of its fields.

    Call arguments:
        inputs: tuple `(source_ids, target_in_ids)`, int `(batch_size, S)` and
            `(batch_size, T)`, right-padded with 0; `target_in_ids = [bos] + target`.
        training: bool, whether dropout is active.
        return_attention_scores: bool, also return the attention weights.

    Returns:
        logits `(batch_size, T, target_vocab_size)`, and the weights
        `(batch_size, T, S)` if `return_attention_scores=True`. Where
        `target_in_ids` is padding (0) the values are unspecified.

    Decoding one step at a time:

    >>> memory, state = model.encode(source_ids)
    >>> logits, state, weights = model.decode_step(token_ids, state, memory)
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = ModelConfig(**config)
        self.config = config
        tied = config.tie_embeddings != "none"
        # One (V, E) matrix for source, target and output (`tie_embeddings: all`).
        self.shared_embedding = None
        if config.tie_embeddings == "all":
            self.shared_embedding = keras.layers.Embedding(
                config.target_vocab_size, config.embedding_dim, name="shared_embedding"
            )
        blocks = dict(
            num_heads=config.heads, feed_forward_dim=config.inner_dim, norm=config.norm,
            activation=config.activation, dropout=config.dropout,
            attention_dropout=config.attention_dropout,
            position_encoding=config.position_encoding, max_positions=config.max_positions,
        )
        if config.encoder == "self-attention":
            self.encoder = TransformerEncoder(
                config.source_vocab_size, config.model_dim, config.encoder_layers,
                embedding=self.shared_embedding, final_gain=config.encoder_norm_gain,
                name="encoder", **blocks,
            )
        else:
            recurrent = dict(
                num_layers=config.encoder_layers, bidirectional=config.bidirectional,
                merge_mode=config.merge_mode, dropout=config.dropout,
                embedding=self.shared_embedding, name="encoder",
            )
            if config.encoder == "cascade":
                self.encoder = CascadeEncoder(
                    config.source_vocab_size, config.embedding_dim, config.units,
                    config.cell, num_blocks=config.encoder_blocks, num_heads=config.heads,
                    feed_forward_dim=config.inner_dim, norm=config.norm,
                    activation=config.activation,
                    attention_dropout=config.attention_dropout,
                    final_gain=config.encoder_norm_gain, **recurrent,
                )
            else:
                self.encoder = Encoder(config.source_vocab_size, config.embedding_dim,
                                       config.units, config.cell, **recurrent)
        self.num_states = 2 if config.cell == "lstm" else 1
        # One dense bridge per state tensor: h, and c for an LSTM.
        dense = config.bridge == "dense" and not self.self_attention_decoder
        num_bridges = self.num_states if dense else 0
        self.bridge_layers = [
            keras.layers.Dense(config.units, activation="tanh", name=f"bridge_{index}")
            for index in range(num_bridges)
        ]
        decoder_args = dict(
            vocab_size=config.target_vocab_size, embedding_dim=config.embedding_dim,
            units=config.units, cell=config.cell, memory_dim=config.memory_dim,
            score=config.score, alignment=config.alignment, window=config.window,
            attention_units=config.attention_units, dropout=config.dropout,
            tie_output=tied, embedding=self.shared_embedding, name="decoder",
        )
        if self.self_attention_decoder:
            self.decoder = TransformerDecoder(
                config.target_vocab_size, config.model_dim, config.memory_dim,
                config.decoder_layers, score=config.score,
                attention_units=config.attention_units, tie_output=tied,
                embedding=self.shared_embedding, name="decoder", **blocks,
            )
        elif config.decoder == "bahdanau":
            self.decoder = BahdanauDecoder(**decoder_args)
        else:
            self.decoder = LuongDecoder(input_feeding=config.input_feeding, **decoder_args)
        self.alignment_layer = (
            AlignmentLayer(config.model_dim if self.self_attention_decoder else config.units,
                           context=config.alignment_context, name="alignment_layer")
            if config.alignment_layer else None
        )
        self.build()

    @property
    def self_attention_encoder(self):
        """Whether the encoder has self-attention blocks (`self-attention`, `cascade`)."""
        return self.config.self_attention_encoder

    @property
    def self_attention_decoder(self):
        return self.config.decoder == "self-attention"

    def build(self, input_shape=None):
        if self.shared_embedding is not None:  # first, so its weight is named after it
            self.shared_embedding.build()
        self.encoder.build()
        for layer in self.bridge_layers:
            layer.build((None, self.config.final_state_dim))
        self.decoder.build()
        if self.alignment_layer is not None:
            features = (
                self.config.model_dim if self.self_attention_decoder else self.config.units)
            self.alignment_layer.build((None, None, features),
                                       (None, None, self.config.embedding_dim),
                                       (None, None, self.config.memory_dim))
        self.built = True

    def bridge(self, final_state):
        """The decoder's initial cell state from the encoder's final state.

        A self-attention encoder's final state is one tensor, the mean of its
        outputs; an LSTM decoder bridges it to both `h` and `c`.
        """
        if len(final_state) < self.num_states:
            final_state = tuple(final_state) * self.num_states
        if self.config.bridge == "zeros":
            batch_size = ops.shape(final_state[0])[0]
            return tuple(
                ops.zeros((batch_size, self.config.units), dtype=state.dtype)
                for state in final_state
            )
        if self.config.bridge == "copy":
            return tuple(final_state)
        return tuple(layer(state) for layer, state in zip(self.bridge_layers, final_state))

    def encode(self, source_ids, training=False):
        """Read the source once.

        Args:
            source_ids: int `(batch_size, S)`, right-padded with 0.
            training: bool.

        Returns:
            `(memory, state)`: `memory` a dict of batch-first tensors, `values`
            `(batch_size, S, memory_dim)`, `projected_keys` (the attention's key
            projection, computed here once per sentence) and `source_mask`
            `(batch_size, S)` bool; `state` the decoder's initial state, a tuple of
            batch-first tensors. A self-attention decoder's memory holds every
            block's cross-attention keys and values instead of `projected_keys`,
            and its state is its empty cache, which each `decode_step` extends.
        """
        values, final_state, source_mask = self.encoder(source_ids, training=training)
        memory = self.decoder.memory(values, source_mask)
        if self.self_attention_decoder:
            return memory, self.decoder.initial_state(ops.shape(source_ids)[0])
        state = self.decoder.initial_state(self.bridge(final_state))
        return memory, state

    def decode_step(self, token_ids, state, memory, training=False):
        """One decoder step.

        Args:
            token_ids: int `(batch_size,)`, the previous target token (bos first).
            state: the tuple from `encode` or from the previous step.
            memory: the dict from `encode`.
            training: bool.

        Returns:
            `(logits (batch_size, V), new_state, weights (batch_size, S))`.
        """
        if self.self_attention_decoder:
            features, state, weights = self.decoder.step(
                token_ids, state, memory, training=training
            )
        else:
            projected_embedding = self.decoder.embed(token_ids, training=training)
            features, state, weights = self.decoder.step(
                projected_embedding, state, memory, training=training
            )
        return self.decoder.output_layer(features), state, weights

    def features(self, inputs, training=None, stepwise=False, cross_attention=None):
        """Teacher-forced decoder features `(batch_size, T, units)` and weights.

        `logits = model.decoder.output_layer(features)`; the training step applies
        it to the non-pad positions only. `stepwise=True` forces the step-by-step
        path for a decoder that has a faster one (same result). The weights
        `(batch_size, T, S)` are those search reports (see `call`), or with
        `cross_attention=(layer, head)` (1-based) that head of that block's
        cross-attention, what guided alignment training supervises (a recurrent
        decoder has one attention, whatever the pair), or with
        `cross_attention="alignment"` the alignment layer's.
        """
        source_ids, target_in_ids = inputs
        if cross_attention == "alignment":
            values, final_state, source_mask = self.encoder(source_ids, training=training)
            features, _ = self._decode(target_in_ids, values, final_state, source_mask,
                                       training=training)
            return features, self.alignment_weights(features, target_in_ids, values,
                                                    source_mask)
        memory, state = self.encode(source_ids, training=training)
        if cross_attention is None or not self.self_attention_decoder:
            return self.decoder(
                target_in_ids, state, memory, training=training, stepwise=stepwise
            )
        layer, head = cross_attention
        features, _, maps = self.decoder(
            target_in_ids, state, memory, training=training, return_attention_scores=True
        )
        return features, maps["cross"][layer - 1][:, head - 1]

    def attention_maps(self, source_ids, target_in_ids):
        """Every attention's weights under teacher forcing, per layer.

        Returns:
            dict of lists with one entry per layer, each `(batch_size, heads, Tq,
            Tv)`: `"encoder"` (the blocks of self-attention and cascade encoders;
            else empty), `"decoder"` (self-attention decoders' own; else empty) and
            `"cross"`, over the source (an RNN decoder's one attention as a single
            head); with an alignment layer, `"alignment"` too (one layer, one head).
        """
        return self.teacher_forced(source_ids, target_in_ids)[1]

    def teacher_forced(self, source_ids, target_in_ids, return_steps=False):
        """One teacher-forced pass: the decoder's features and every attention.

        With `return_steps=True` every entry of `maps` is the attention layer's own
        `layers.AttentionRecord` of the pass instead of its weights (`.weights`;
        a multi-head layer's with its heads axis, a single attention's without):
        what `attncli.model.trace` selects and labels. The pass then runs eagerly:
        a recurrent decoder whose recurrence runs through its attention takes one
        `step` after another, as the search does.

        Returns:
            `(features, maps)`: `features` `(batch_size, T, units)`, `logits =
            model.decoder.output_layer(features)` as in `call`; `maps` those of
            `attention_maps`.
        """
        encoder_maps = []
        if self.self_attention_encoder:
            values, final_state, source_mask, encoder_maps = self.encoder(
                source_ids, return_attention_scores=True, return_steps=return_steps
            )
        else:
            values, final_state, source_mask = self.encoder(source_ids)
        features, maps = self._decode(target_in_ids, values, final_state, source_mask,
                                      return_steps=return_steps)
        maps = {"encoder": encoder_maps, **maps}
        if self.alignment_layer is not None:
            weights = self.alignment_weights(features, target_in_ids, values, source_mask,
                                             return_steps=return_steps)
            maps["alignment"] = [weights if return_steps else weights[:, None]]
        return features, maps

    def _decode(self, target_in_ids, values, final_state, source_mask, training=None,
                return_steps=False):
        """The teacher-forced decoder over the encoder's outputs: `(features, maps)`,
        `maps` `"decoder"` and `"cross"` as in `attention_maps` (records with
        `return_steps`)."""
        memory = self.decoder.memory(values, source_mask)
        if self.self_attention_decoder:
            features, _, maps = self.decoder(target_in_ids, None, memory, training=training,
                                             return_attention_scores=True,
                                             return_steps=return_steps)
            return features, maps
        state = self.decoder.initial_state(self.bridge(final_state))
        features, weights = self.decoder(target_in_ids, state, memory, training=training,
                                         return_steps=return_steps)
        return features, {"decoder": [],
                          "cross": [weights if return_steps else weights[:, None]]}

    def alignment_weights(self, features, target_in_ids, values, source_mask,
                          return_steps=False):
        """The alignment layer's weights `(batch_size, T, S)` (`AlignmentLayer`): row t
        for the output `y_t`, from the features of the pass over `target_in_ids`
        (`[bos] y_1 ..`) and `E(y_t)`, the embedding of the next token read (its
        record with `return_steps`)."""
        embedded, target_mask = self.alignment_inputs(target_in_ids)
        return self.alignment_layer(features, embedded, values, source_mask,
                                    target_mask=target_mask, return_steps=return_steps)

    def alignment_inputs(self, target_in_ids):
        """What the alignment layer reads beside the features: `(next_embeddings,
        target_mask)`, row t `E(y_t)` `(batch_size, T, embedding_dim)` (zeros past the
        end) and whether `y_t` is a real token `(batch_size, T)`."""
        following = ops.concatenate(
            [target_in_ids[:, 1:], ops.zeros_like(target_in_ids[:, :1])], axis=1)
        embedding = self.decoder.embedding
        # A self-attention decoder's embedding adds positions to its token table.
        table = getattr(embedding, "token_embedding", embedding)
        embedded = table(following) * ops.cast(
            ops.expand_dims(following != 0, -1), table.compute_dtype)
        return embedded, following != 0

    def trace(self, source_ids, target_in_ids, attention="cross", layer=1, head=None,
              step=1):
        """One step of one attention, with everything its weights came from.

        The model runs teacher-forced over one sentence (`teacher_forced` with
        `return_steps=True`): `source_ids` `(1, S)` and `target_in_ids` `(1, T)`,
        `[bos]` and the output tokens but the last.

        Args:
            attention: `"cross"` (the decoder's attention over the source),
                `"encoder"` or `"decoder"` (a self-attention side's own), or
                `"alignment"` (the alignment layer's).
            layer: int, 1-based block (1 for a recurrent decoder's attention).
            head: int, 1-based head; None: head 1 (a recurrent decoder's attention
                has one).
            step: int, 1-based query position.

        Returns:
            `attncli.model.trace.AttentionStep`: the layer's record of that query
            (query, keys, values, `scores = score(q, k_s)`, mask, `weights =
            softmax(scores)`, `context = weights @ values`), labelled.
        """
        from attncli.model.trace import check_attention, select_step, trace_attentions

        check_attention(self, attention, layer)
        records = trace_attentions(self, source_ids, target_in_ids)
        return select_step(self, records, attention, layer, head, step)

    def call(self, inputs, training=None, return_attention_scores=False):
        features, weights = self.features(inputs, training=training)
        logits = self.decoder.output_layer(features)
        if return_attention_scores:
            return logits, weights
        return logits

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}
