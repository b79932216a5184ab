"""Attention layers for Keras 3, exact to the papers.

Importable on their own: `from layers import LuongAttention`. Every layer here uses
`keras.ops` only, so it runs on any Keras backend.

`import layers` loads no Keras: the registry of scores (`layers.scores`) is read where
TensorFlow must not load (`attncli --help`, checking a configuration). A layer's module
loads, and registers its classes for `keras.saving`, when a name of it is first used
(`layers.LuongAttention`, `from layers import LuongAttention`); `from layers import *`
loads them all, as a process that reads a `.keras` file needs.
"""

import importlib

# Each public name and the module of `layers` that defines it.
_MODULES = {
    "AttentionRecord": "attention_record",
    "join_queries": "attention_record",
    "BahdanauAttention": "bahdanau_attention",
    "BaseAttention": "base_attention",
    "DotProductAttention": "dot_product_attention",
    "LuongAttention": "luong_attention",
    "masked_softmax": "masking",
    "sequence_mask": "masking",
    "MultiHeadAttention": "multi_head_attention",
    "PositionalEmbedding": "positional_embedding",
    "ScaledDotSelfAttention": "scaled_dot_self_attention",
}

__all__ = list(_MODULES)


def __getattr__(name):
    if name not in _MODULES:
        raise AttributeError(f"module 'layers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"layers.{_MODULES[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_MODULES})
