"""Search: from a trained model to output text, and scores for that text.

`decoding` runs greedy and beam search inside one `tf.while_loop` and keeps the attention
weights of every output token (`search_steps` holds what both share, `growing_state` the
self-attention decoder's cache); `loading` reads a saved model with its run's search settings,
`translation` turns sentences into batches, searches and turns ids back into text,
`serving` exports that as a TensorFlow SavedModel; `metrics` scores outputs (sacreBLEU BLEU and chrF, PER and WER
for pronunciations) and `evaluation` applies them to a validation or test split.
"""
