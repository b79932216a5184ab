"""Training: from a configuration and a run directory to a kept model.

`steps` holds the teacher-forced loss, the optimizer and its schedule, and the compiled
train and eval steps; `trainer` runs epochs, checkpoints, validation, early stopping and
resumption; `distribution` chooses the tf.distribute strategy and keeps workers agreed;
`run_directory` owns the files of a run (config, checkpoints, metrics, kept model).
"""
