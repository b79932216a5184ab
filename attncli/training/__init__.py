"""Training: from a configuration and a run directory to a kept model.

`builder` makes what a run is made of (splits, tokenizers, model, optimizer); `steps`
holds the teacher-forced loss, the optimizer and its schedule (`optimizers`: fused Adam
and the moving average of the weights; `precision`: `precision: auto`), and the compiled
train and eval steps; `guided` the guided-alignment loss; `trainer` runs epochs,
checkpoints, early stopping and resumption, `validation` scores the weights it keeps
(`stop_metric` says which figure and which way is better), and `events` writes
TensorBoard curves; `distribution` chooses the tf.distribute strategy and keeps workers
agreed; `init_from` starts a run from another's model; `run_directory` owns the files of
a run (config, checkpoints, metrics, kept model), `run_lock` keeps it to one writer,
`checkpoint_files` reads its checkpoints from disk and `leftovers` clears what a killed
writer left.
"""
