"""The validation figure that keeps the best model and counts patience, and which way
is better (no TensorFlow here).

    metric = StopMetric.of(config)   # training.stop_metric, or the task's own
    value = metric.maximised(record) # BLEU as it is, minus a loss, PER or WER
"""

import dataclasses
import math

from attncli.config.training import STOP_METRICS

# The metrics whose lower values are better.
LOWER_IS_BETTER = ("loss", "per", "wer", "alignment")
# The key of each metric in an evaluation's record, where it is not the metric's name.
RECORD_KEYS = {"loss": "valid_loss", "alignment": "valid_alignment_loss"}


@dataclasses.dataclass(frozen=True)
class StopMetric:
    """One stop metric, compared as a value to maximise.

    Args:
        name: `"bleu"`, `"chrf"`, `"loss"`, `"per"`, `"wer"` or `"alignment"`
            (`training.stop_metric`).
    """

    name: str

    @classmethod
    def of(cls, config, held_out_links=False):
        """The stop metric of run configuration `config`: `training.stop_metric`, or
        when it is null the task's own (`"bleu"` for translation, `"wer"` for
        pronunciation), except for a run that trains an alignment layer alone
        (`guided_alignment.freeze_translation`), whose translations do not change:
        `"alignment"` when the validation pairs have links (`held_out_links`)."""
        if config.training.stop_metric is not None:
            return cls(config.training.stop_metric)
        guided = config.training.guided_alignment
        if held_out_links and guided is not None and guided.freeze_translation:
            return cls("alignment")
        return cls(STOP_METRICS[config.data.task][0])

    @property
    def figure(self):
        """The key of the metric in an evaluation's record (`"valid_loss"` for loss,
        `"valid_alignment_loss"` for alignment)."""
        return RECORD_KEYS.get(self.name, self.name)

    @property
    def lower_is_better(self):
        return self.name in LOWER_IS_BETTER

    def maximised(self, figures):
        """The metric of an evaluation's `figures` (a record) as a value to maximise:
        the figure itself (BLEU, chrF) or minus it (loss, PER, WER)."""
        value = figures[self.figure]
        return -value if self.lower_is_better else value

    def shown(self, maximised):
        """The metric as users read it, from `maximised`'s value (None for -inf)."""
        if not math.isfinite(maximised):
            return None
        return -maximised if self.lower_is_better else maximised
