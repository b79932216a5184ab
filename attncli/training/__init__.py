"""Training: from a configuration and a run directory to a kept model.

`builder` makes what a run is made of (`parts`: splits, tokenizers from `run_tokenizers`,
model, optimizer, and the position of training every checkpoint holds); `losses` holds the
teacher-forced, label-smoothed loss and `guided` the guided-alignment one; `optimizer_setup`
makes the optimizer (`optimizers`: fused Adam and the moving average of the weights;
`precision`: `precision: auto`); `steps` compiles the training step, `distributed_step` the
same split across replicas, and `eval_step` the validation loss. `trainer` runs epochs and
checkpoints, `stopping` says when they end, `resumption` restores the newest checkpoint,
`validation` scores the weights the run keeps (`stop_metric` says which figure and which way
is better), and `events` writes TensorBoard curves; `distribution` chooses the
tf.distribute strategy and keeps workers agreed; `init_from` and `initial_weights` start a
run from another's model; `run_directory` owns the files of a run (config, checkpoints,
metrics, kept model), `run_lock` keeps it to one writer, `checkpoint_files` reads its
checkpoints from disk and `leftovers` clears what a killed writer left.
"""
