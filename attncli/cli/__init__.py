"""Command line: the Typer app and everything it prints.

`app` registers the commands (`score-demo`, `train`, `configs`, `translate`, `align`,
`serve`, `export`, `inspect-weights`); each `*_command` module declares one command, its
options and help, beside its body (serve's options are still in `app`). `group` reports
every mistake as one line and makes `--help` show what a user types; `options` holds what
several commands share (RUN, `--compute-type`, the quiet TensorFlow import). The modules
imported by `--help` import no TensorFlow: commands import it inside their body.

Beside the commands: `translate_streams` reads `translate`'s lines and writes its results,
`translate_tensorflow` and `translate_ctranslate2` translate them with the engine `engines`
checks (for `serve` too); `line_stream` feeds lines as they arrive; `export_check` checks an
export in a fresh Python; `inspect_views` chooses what `inspect-weights` shows; `align_inputs`
reads `align`'s pairs and gold links; `train_failures` explains a training stopped by the
machine; `runs` is what several commands read the same way. `step_table` is the one table of
an attention step (`inspect-weights --step` and `score-demo`); `demo_examples`,
`demo_inputs`, `score_demo` and `demo_render` are score-demo's examples, checked inputs, walk
and output; `progress` and `heatmap` draw progress lines and pictures (`fonts` for the
scripts matplotlib's default font lacks), and `tables` cuts a table wider than the terminal
into blocks of columns.
"""
