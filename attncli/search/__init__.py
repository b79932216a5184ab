"""Search: from a trained model to output text, and scores for that text.

`decoding` runs greedy and beam search inside one `tf.while_loop` and keeps the attention
weights of every output token (`search_steps` holds what both share, `growing_state` the
states that change shape from step to step, `sampling` the random draws of a sampled search,
`prefixes` what a forced prefix may be, `ensemble` several models searched as one);
`hypotheses` is what a translation is, for every engine; `loading` reads a saved model
with its run's search settings, `translation` turns sentences into batches, searches and
turns ids back into text, `serving` exports that as a TensorFlow SavedModel; `forced`
reads the attention over a given translation, `inspection` makes a translated
sentence's `sentence_view` (every attention, layer and head, folded into words, any one
step), and `alignments` reads the word links of `translate --alignments`; `metrics`
scores outputs (sacreBLEU BLEU and chrF, PER and WER for pronunciations) and `evaluation`
applies them to a validation or test split.
"""
