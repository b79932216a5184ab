"""An attncli Transformer as a CTranslate2 model, built with CTranslate2's own spec classes.

CTranslate2 (`ctranslate2.specs.TransformerSpec`) describes a Transformer of Vaswani et
al. 2017 by its variables and a few settings; `TransformerConverter` fills one from a
`Seq2Seq` whose encoder and decoder are both self-attention, and
`ctranslate2.converters.Converter.convert` validates and writes it (its documented way
to convert a model of one's own). Every piece is mapped to what computes the same thing:

    attncli                                      CTranslate2
    norm: pre | post (epsilon 1e-6)              pre_norm=True | False; layer_norm_epsilon=1e-6
                                                 (its default is 1e-5 for a LayerNorm with beta)
    final LayerNorm of a pre-norm stack          encoder/decoder layer_norm
    sqrt(d) E[w] + PE(t), t = 0, 1, ...          scale_embeddings (sqrt(d)); position_encodings
                                                 given as a table (its own sinusoids start at
                                                 position 1 and put the sines before the
                                                 cosines; ours alternate, Vaswani et al. 3.5)
    learned positions, t >= max_positions        the table's last row repeated
    W_q, W_k, W_v (in, heads x d_k), biases      self-attention linear_0 = [W_q; W_k; W_v]^T,
                                                 cross-attention linear_0 = W_q^T, linear_1 =
                                                 [W_k; W_v]^T (heads side by side in both)
    W_o, b_o                                     the attention's last linear
    FFN act(x W_1 + b_1) W_2 + b_2               ffn linear_0, linear_1; Activation.RELU or
                                                 .GELU (Keras's "gelu" is the erf one)
    output layer W_o (tie_embeddings: the        decoder projection (the same array as the
    target embedding E), b_o                     embedding when tied: CTranslate2 stores it once)
    [PAD] and [START] never emitted (their       their projection bias -1e9: exp(-1e9 - max)
    logits masked before the softmax)            is 0 in float32, the same log-softmax
    vocabularies, ids in order                   source and target vocabularies, same order
    [START], [END], [UNK]                        decoder_start_token and bos_token, eos_token,
                                                 unk_token
    last block's cross-attention, mean of heads  alignment_layer=-1, alignment_heads=heads
                                                 (what return_attention gives)

`attncli.export.convertible.ctranslate2_refusal` says why a model cannot be expressed this
way.
"""

import numpy as np

import ctranslate2
from ctranslate2.specs import common_spec, transformer_spec

from attncli.data.vocabulary import END_TOKEN, PAD, START, START_TOKEN, UNK_TOKEN
from attncli.export.convertible import ctranslate2_refusal

LAYER_NORM_EPSILON = 1e-6  # keras.layers.LayerNormalization(epsilon=1e-6) in every block
NEVER_EMITTED_BIAS = -1e9
ACTIVATIONS = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU}


def position_table(layer, rows):
    """`(rows, d)` float32: the encoding `layer` (a `layers.PositionalEmbedding`) adds at
    positions 0 .. rows - 1."""
    from layers.positional_embedding import sinusoidal_encoding

    if layer.encoding == "learned":
        table = layer.position_table.numpy()
        return table[np.minimum(np.arange(rows), len(table) - 1)]
    return np.asarray(sinusoidal_encoding(np.arange(rows), layer.output_dim), np.float32)


def _kernel(weight):
    """A Keras kernel `(in, out)` as CTranslate2's `(out, in)`."""
    return np.ascontiguousarray(weight.numpy().T)


def _linear(spec, kernel, bias):
    spec.weight = _kernel(kernel)
    spec.bias = bias.numpy()


def _norm(spec, layer):
    spec.gamma = layer.gamma.numpy()
    spec.beta = layer.beta.numpy()


def _fused(spec, attention, parts):
    """`spec.weight` and `spec.bias`: the projections `parts` ("q", "k", "v") of
    `attention` (a `layers.MultiHeadAttention`) stacked, in CTranslate2's layout."""
    spec.weight = np.concatenate([_kernel(getattr(attention, f"W_{p}")) for p in parts])
    spec.bias = np.concatenate([getattr(attention, f"b_{p}").numpy() for p in parts])


def _attention(spec, attention, norm, *, self_attention):
    if attention.score_layer.weights:
        raise ValueError(f"the {attention.name} score has weights of its own: "
                         "not the scaled dot score")
    if self_attention:
        _fused(spec.linear[0], attention, "qkv")
    else:
        _fused(spec.linear[0], attention, "q")
        _fused(spec.linear[1], attention, "kv")
    _linear(spec.linear[-1], attention.W_o, attention.b_o)
    _norm(spec.layer_norm, norm)


def _feed_forward(spec, block):
    _linear(spec.linear_0, block.feed_forward_inner.kernel, block.feed_forward_inner.bias)
    _linear(spec.linear_1, block.feed_forward_outer.kernel, block.feed_forward_outer.bias)
    _norm(spec.layer_norm, block.feed_forward_norm)


def _stack(spec, stack, rows):
    """The embedding, positions and final norm of `stack` (a `SelfAttentionStack`)."""
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = stack.embedding.token_embedding.embeddings.numpy()
    spec.scale_embeddings = True
    spec.position_encodings.encodings = position_table(stack.embedding, rows)
    if stack.final_norm is not None:
        _norm(spec.layer_norm, stack.final_norm)


class TransformerConverter(ctranslate2.converters.Converter):
    """Converts an attncli `Seq2Seq` with a self-attention encoder and decoder (see the
    module for the mapping).

    Args:
        model: the `Seq2Seq`, weights loaded.
        source_tokens, target_tokens: the vocabularies, in id order.
        source_positions: int, the longest source (in tokens) the model will read: the
            rows of the encoder's position table.
        target_positions: int, the longest translation (in tokens, `[END]` included):
            the rows of the decoder's.
    """

    def __init__(self, model, source_tokens, target_tokens, source_positions, target_positions):
        reason = ctranslate2_refusal(model.config)
        if reason is not None:
            raise ValueError(reason)
        self.model = model
        self.source_tokens = list(source_tokens)
        self.target_tokens = list(target_tokens)
        self.source_positions = source_positions
        self.target_positions = target_positions

    def _load(self):
        config = self.model.config
        encoder, decoder = self.model.encoder, self.model.decoder
        options = dict(pre_norm=config.norm == "pre", activation=ACTIVATIONS[config.activation])
        spec = transformer_spec.TransformerSpec(
            transformer_spec.TransformerEncoderSpec(config.encoder_layers, config.heads,
                                                    **options),
            transformer_spec.TransformerDecoderSpec(
                config.decoder_layers, config.heads, alignment_layer=-1,
                alignment_heads=config.heads, **options,
            ),
        )
        _stack(spec.encoder, encoder, self.source_positions)
        for layer, block in zip(spec.encoder.layer, encoder.blocks):
            _attention(layer.self_attention, block.self_attention, block.self_attention_norm,
                       self_attention=True)
            _feed_forward(layer.ffn, block)
        _stack(spec.decoder, decoder, self.target_positions)
        for layer, block in zip(spec.decoder.layer, decoder.blocks):
            _attention(layer.self_attention, block.self_attention, block.self_attention_norm,
                       self_attention=True)
            _attention(layer.attention, block.cross_attention, block.cross_attention_norm,
                       self_attention=False)
            _feed_forward(layer.ffn, block)
        output = decoder.output_layer
        spec.decoder.projection.weight = (spec.decoder.embeddings.weight if decoder.tie_output
                                          else _kernel(output.kernel))
        bias = output.bias.numpy().copy()
        bias[[PAD, START]] = NEVER_EMITTED_BIAS
        spec.decoder.projection.bias = bias
        spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
        spec.config.unk_token = UNK_TOKEN
        spec.config.bos_token = START_TOKEN
        spec.config.eos_token = END_TOKEN
        spec.config.decoder_start_token = START_TOKEN
        spec.register_source_vocabulary(self.source_tokens)
        spec.register_target_vocabulary(self.target_tokens)
        return spec
