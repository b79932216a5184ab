"""The model of the TensorFlow tutorial "Neural machine translation with attention".

The baseline of the spa-eng benchmarks, rebuilt from Keras built-ins: a bidirectional
GRU encoder whose directions are summed, a GRU decoder, one-head `MultiHeadAttention`
from the decoder's outputs to the encoder's, a residual connection and LayerNorm, then
the output layer; trained on the masked cross-entropy with Adam, decoded by the
tutorial's loop (one model call per target token).
"""

import keras
import tensorflow as tf

from attncli.data.vocabulary import END, PAD, START

UNITS = 256
MAX_LENGTH = 50


class TutorialTranslator(keras.Model):
    """The model of the TF tutorial "Neural machine translation with attention", rebuilt.

    Encoder: embedding, bidirectional GRU, directions summed. Decoder: embedding, GRU, then
    one-head `MultiHeadAttention` from the GRU outputs to the encoder outputs, added to the
    GRU outputs and layer-normalised, then the output layer. The source mask is passed to
    the attention explicitly.
    """

    def __init__(self, source_vocab_size, target_vocab_size, units=UNITS, **kwargs):
        super().__init__(**kwargs)
        self.source_embedding = keras.layers.Embedding(source_vocab_size, units, name="source")
        self.encoder_rnn = keras.layers.Bidirectional(
            keras.layers.GRU(units, return_sequences=True), merge_mode="sum", name="encoder"
        )
        self.target_embedding = keras.layers.Embedding(target_vocab_size, units, name="target")
        self.decoder_rnn = keras.layers.GRU(
            units, return_sequences=True, return_state=True, name="decoder"
        )
        self.attention = keras.layers.MultiHeadAttention(1, units, name="attention")
        self.norm = keras.layers.LayerNormalization(name="norm")
        self.output_layer = keras.layers.Dense(target_vocab_size, name="logits")

    def encode(self, source_ids):
        source_mask = source_ids != PAD
        context = self.encoder_rnn(self.source_embedding(source_ids), mask=source_mask)
        return context, source_mask

    def decode(self, context, source_mask, target_ids, state=None):
        target_mask = target_ids != PAD
        outputs, state = self.decoder_rnn(
            self.target_embedding(target_ids), mask=target_mask, initial_state=state
        )
        attended = self.attention(
            query=outputs, value=context, attention_mask=source_mask[:, None, :]
        )
        features = self.norm(outputs + attended)
        return self.output_layer(features), state

    def call(self, inputs):
        source_ids, target_in_ids = inputs
        context, source_mask = self.encode(source_ids)
        return self.decode(context, source_mask, target_in_ids)[0]


def tutorial_greedy(model, source_ids, max_length=MAX_LENGTH):
    """The tutorial's translate loop: one model call per target token, argmax each time."""
    context, source_mask = model.encode(source_ids)
    token_ids = tf.fill([tf.shape(source_ids)[0], 1], START)
    done = tf.zeros([tf.shape(source_ids)[0], 1], tf.bool)
    state = None
    emitted = []
    for _ in range(max_length):
        logits, state = model.decode(context, source_mask, token_ids, state)
        token_ids = tf.argmax(logits[:, -1:, :], axis=-1, output_type=tf.int32)
        done = done | (token_ids == END)
        token_ids = tf.where(done, PAD, token_ids)
        emitted.append(token_ids)
        if tf.executing_eagerly() and tf.reduce_all(done):
            break
    return tf.concat(emitted, axis=1)


def tutorial_train_step(model, optimizer):
    """A compiled step of the tutorial's loss: cross-entropy averaged over non-pad tokens."""
    signature = (
        (tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((None, None), tf.int32)),
        tf.TensorSpec((None, None), tf.int32),
    )
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    @tf.function(input_signature=signature)
    def step(inputs, target_out):
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)
            mask = tf.cast(target_out != PAD, "float32")
            loss = tf.reduce_sum(loss_fn(target_out, logits) * mask) / tf.reduce_sum(mask)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return {"loss": loss, "tokens": tf.reduce_sum(tf.cast(mask, "int32"))}

    return step
