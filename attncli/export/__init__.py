"""Exports of a trained model for other programs to run: a CTranslate2 model directory
(`convertible` says from the configuration alone whether a model can be one;
`ctranslate2_model`, `ctranslate2_export` write and check it) and its engine for `attncli
translate --engine ctranslate2` (`ctranslate2_engine`, `plain_tokenizer`), none of which
imports TensorFlow to translate. The TensorFlow SavedModel is `attncli.search.serving`'s."""
