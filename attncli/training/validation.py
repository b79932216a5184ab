"""Validation during training, and the test scoring of the kept model once it ends.

Validation judges the weights the run keeps: the moving average of the weights when
`training.average_decay` is set, else the trained ones. It reports the mean loss per
target token over the whole validation split (and guided alignment's loss per linked
target token, when the validation pairs have word links) and the task's metrics (BLEU and chrF, or
PER and WER; see `attncli.search.evaluation`) on its first `training.eval_sentences`
sources, decoded with `training.eval_beam_size`. The test split is scored once, after
training, by the kept model with the run's decoding settings; it never influences
training or model selection.

References are compared in the form the target side is written in (see
`reference_normaliser`).
"""

import contextlib
import dataclasses

import keras

from attncli.data.pipeline import epoch_batches
from attncli.files import write_json_atomically, write_text_atomically
from attncli.search.loading import load_model
from attncli.search.evaluation import evaluate_corpus, reference_normaliser
from attncli.search.translation import Translator
from attncli.training.guided import make_guided_eval_step
from attncli.training.eval_step import make_eval_step
from attncli.training.steps import trained_variables


class Validator:
    """Scores the model of a training run on its validation split.

    Args:
        parts: the run's `TrainingParts`.
    """

    def __init__(self, parts):
        self.config = parts.config
        self.model = parts.model
        self.optimizer = parts.optimizer
        self.valid = parts.splits.valid
        self.valid_encoded = parts.valid_encoded
        # Guided alignment's validation pairs have links when they were carved from the
        # training file (`build_training`): the alignment loss is then measured too.
        self.has_links = parts.valid_encoded.links is not None
        if self.has_links:
            self.eval_step = make_guided_eval_step(parts.model, self.config.training)
        else:
            self.eval_step = make_eval_step(parts.model, self.config.training)
        self.translator = Translator(
            parts.model, parts.source_tokenizer, parts.target_tokenizer,
            dataclasses.replace(
                self.config.decoding, beam_size=self.config.training.eval_beam_size, n_best=1
            ),
            source_end=self.config.data.source_end, attention_weights=False,
        )
        self.normalise = reference_normaliser(parts.target_tokenizer)

    @property
    def references(self):
        """How references are written for scoring: `"normalised"` or `"raw"`."""
        return "raw" if self.normalise is None else "normalised"

    @property
    def weights_kind(self):
        """Which weights validation and the kept model use: `"average"` or `"raw"`."""
        return "raw" if self.config.training.average_decay is None else "average"

    def loss(self):
        """Mean loss per target token over the whole validation split."""
        return self.losses()["loss"]

    def losses(self):
        """Mean losses per target token over the whole validation split.

        Returns:
            `{"loss", "nll"}`: the training objective (label-smoothed when training
            smooths) and the plain cross-entropy `-log p(y)`; with the validation
            pairs' links (`has_links`) also `"alignment"`, guided alignment's loss per
            linked target token (`attncli.training.guided`).
        """
        data = self.config.data
        dataset = epoch_batches(
            self.valid_encoded, 0, batch_size=data.batch_size, bucketing=data.bucketing,
            shuffle=False, seed=0,
        )
        totals, tokens = {"loss": 0.0, "nll": 0.0}, 0
        alignment_sum, links = 0.0, 0
        for inputs, labels in dataset:
            result = self.eval_step(inputs, labels)
            count = int(result["tokens"])
            for key in totals:
                totals[key] += float(result[key]) * count
            tokens += count
            if self.has_links:
                alignment_sum += float(result["alignment_sum"])
                links += int(result["links"])
        means = {key: total / max(tokens, 1) for key, total in totals.items()}
        if self.has_links:
            means["alignment"] = alignment_sum / max(links, 1)
        return means

    def loss_figures(self, raw_loss=None):
        """The losses an evaluation records: `valid_loss`, `valid_nll` when smoothing, and
        `valid_alignment_loss` when the validation pairs have links.

        Args:
            raw_loss: the raw weights' loss, recorded as `valid_loss_raw` beside that of
                the average (it shows what averaging gains). Defaults to None (not
                recorded).
        """
        valid = self.losses()
        figures = {"valid_loss": valid["loss"]}
        if raw_loss is not None:
            figures["valid_loss_raw"] = raw_loss
        if self.config.training.label_smoothing:
            figures["valid_nll"] = valid["nll"]
        if "alignment" in valid:
            figures["valid_alignment_loss"] = valid["alignment"]
        return figures

    def metric(self):
        """The task's metrics on (the first `eval_sentences` of) the validation split.

        Returns:
            A dict of the figures: BLEU and chrF, or PER and WER.
        """
        figures, _ = evaluate_corpus(
            self.translator, self.valid, self.config.data.task,
            count=self.config.training.eval_sentences,
            normalise=self.normalise, lowercase_bleu=False,
        )
        names = ("per", "wer") if self.config.data.task == "pronunciation" else ("bleu", "chrf")
        return {name: figures[name] for name in names}

    @contextlib.contextmanager
    def averaged_weights(self):
        """Within it, the model holds the moving average of its weights, if one is kept.

        The raw weights, which training goes on with, are put back on leaving, also
        when the evaluation fails. The optimizer pairs its averages with the variables
        it was built with, `trained_variables` (see `build_training`).
        """
        if self.config.training.average_decay is None:
            yield
            return
        variables = trained_variables(self.model, self.config.training)
        raw = [keras.ops.convert_to_numpy(variable) for variable in variables]
        try:
            self.optimizer.finalize_variable_values(variables)
            yield
        finally:
            for variable, value in zip(variables, raw):
                variable.assign(value)


def score_test_split(config, run, test, normalise, progress):
    """Score the run's kept model on the test split with the run's decoding settings.

    Writes `RUN/test.json` (the figures, the decoding settings and how long decoding
    took) and `RUN/test.outputs.txt` (one output per distinct test source, in order of
    first appearance), and logs the figures in `RUN/train.log`.

    Args:
        config: the `RunConfig`.
        run: the `RunDirectory`.
        test: the test `Corpus`.
        normalise: what references pass through first (see `reference_normaliser`).
        progress: where messages go (an object with `message(text)`).

    Returns:
        The dict written to `test.json`, or None when the run has no test split or no
        kept model.
    """
    if not len(test) or not run.model_dir.is_dir():
        return None
    loaded = load_model(run.model_dir)
    translator = loaded.translator(config.decoding, attention_weights=False)
    progress.message(
        f"scoring the best model (epoch {loaded.metadata.get('epoch')}) on the test split"
    )
    figures, outputs = evaluate_corpus(translator, test, config.data.task, normalise=normalise)
    result = {
        "split": "test",
        "references": "raw" if normalise is None else "normalised",
        "model_epoch": loaded.metadata.get("epoch"),
        "weights": loaded.metadata.get("weights", "raw"),
        "decoding": config.decoding.to_dict(),
        **figures,
    }
    write_text_atomically(run.path / "test.outputs.txt", "".join(f"{line}\n" for line in outputs))
    write_json_atomically(run.path / "test.json", result)
    run.log("test " + " ".join(f"{key}={value}" for key, value in result.items()))
    return result
