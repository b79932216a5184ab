"""Several trained models searched as one: their next-token distributions averaged.

At every step each member `m` of an ensemble of `N` models, fed the same prefix, gives
a distribution over the tokens that can be emitted, and the ensemble emits from their
mean (as OpenNMT's and fairseq's ensembles do):

    p(y_t | y_<t, x) = (1/N) sum_m p_m(y_t | y_<t, x)
    log p            = logsumexp_m(log p_m) - log N

Each member reads the source with its own encoder and keeps its own decoder state; the
search sees one model whose `memory` is `{"member_0": memory_0, ...}` and whose `state`
is `(state_0, state_1, ...)`, so a beam's reordering and a finished row's freezing apply
to every member alike. The attention weights an ensemble reports for a step are the mean
of its members' (each a distribution over the same source tokens, so the mean is one).

Members must read and write the same tokens: the same source and target vocabularies,
tokenizer settings, and end-of-source convention; `load_ensemble` checks that and names
the first model that differs. Their architectures may differ (an RNN and a Transformer
ensemble as well as two RNNs). The decoding settings are the first model's.
"""

import math

import tensorflow as tf

from attncli.errors import AttncliError
from attncli.search.search_steps import next_token_log_probs


class Ensemble:
    """Models with the search interface of `attncli.search.decoding`, decoded as one.

    Args:
        models: a sequence of at least one encoder-decoder with `encode` and
            `decode_step`.
    """

    def __init__(self, models):
        self.models = list(models)
        if not self.models:
            raise ValueError("an ensemble needs at least one model")
        self.names = [f"member_{index}" for index in range(len(self.models))]

    def encode(self, source_ids, training=False):
        """Each member's `encode`: `({name: memory}, (state, ...))`."""
        memories, states = {}, []
        for name, model in zip(self.names, self.models):
            memory, state = model.encode(source_ids, training=training)
            memories[name] = memory
            states.append(state)
        return memories, tuple(states)

    def decode_step(self, token_ids, state, memory, training=False):
        """One step of every member; the logits returned are `log p` of the mean.

        Returns:
            `(log_probs, state, weights)`: float32 `(batch_size, V)`, `log p(y_t)` of the
            averaged distribution (padding and start-of-sentence at -inf, so the search's
            own normalisation leaves it unchanged); the members' new states; the mean
            of their attention weights `(batch_size, Ts)`.
        """
        log_probs, states, weights = [], [], []
        for name, model, part in zip(self.names, self.models, state):
            logits, part, step_weights = model.decode_step(
                token_ids, part, memory[name], training=training
            )
            log_probs.append(next_token_log_probs(logits))
            states.append(part)
            weights.append(tf.cast(step_weights, tf.float32))
        if len(self.models) == 1:
            return log_probs[0], tuple(states), weights[0]
        mean = tf.reduce_logsumexp(tf.stack(log_probs), axis=0) - math.log(len(self.models))
        return mean, tuple(states), tf.add_n(weights) / len(weights)


# What members must share to read and write the same tokens.
def _reading(loaded):
    return {
        "source vocabulary": list(loaded.source_tokenizer.vocabulary.tokens),
        "target vocabulary": list(loaded.target_tokenizer.vocabulary.tokens),
        "source tokenizer settings": loaded.source_tokenizer.get_config(),
        "target tokenizer settings": loaded.target_tokenizer.get_config(),
        "end-of-source convention (source_end)": loaded.source_end,
    }


def load_ensemble(directories):
    """The model directories `directories` loaded as one `LoadedModel` whose model is an
    `Ensemble` (a single directory: that model, unwrapped).

    Tokenizers, `source_end` and metadata (hence the decoding settings) are the first
    model's.

    Raises:
        AttncliError: when a model reads or writes other tokens than the first
            (naming the model and what differs), or a directory is not a model.
    """
    from attncli.search.loading import load_model

    directories = list(directories)
    loaded = [load_model(directory) for directory in directories]
    if len(loaded) == 1:
        return loaded[0]
    first = _reading(loaded[0])
    for directory, other in zip(directories[1:], loaded[1:]):
        for what, value in _reading(other).items():
            if value != first[what]:
                raise AttncliError(
                    f"{directory} cannot join an ensemble with {directories[0]}: its {what} "
                    "differs; ensemble models trained on the same data with the same data "
                    "settings"
                )
    return loaded[0]._replace(model=Ensemble(item.model for item in loaded))
