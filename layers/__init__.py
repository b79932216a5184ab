"""Attention layers for Keras 3, exact to the papers.

Importable on their own: `from layers import LuongAttention`. Every layer here uses
`keras.ops` only, so it runs on any Keras backend.
"""

from layers.attention_record import AttentionRecord, join_queries
from layers.bahdanau_attention import BahdanauAttention
from layers.base_attention import BaseAttention
from layers.dot_product_attention import DotProductAttention
from layers.luong_attention import LuongAttention
from layers.masking import masked_softmax, sequence_mask
from layers.multi_head_attention import MultiHeadAttention
from layers.positional_embedding import PositionalEmbedding
from layers.scaled_dot_self_attention import ScaledDotSelfAttention

__all__ = [
    "AttentionRecord",
    "BahdanauAttention",
    "LuongAttention",
    "BaseAttention",
    "DotProductAttention",
    "masked_softmax",
    "MultiHeadAttention",
    "PositionalEmbedding",
    "ScaledDotSelfAttention",
    "join_queries",
    "sequence_mask",
]
