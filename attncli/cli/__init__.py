"""Command line: the Typer app and everything it prints.

`app` declares the commands (`train`, `translate`, `inspect-weights`, `score-demo`,
`align`, `export`, `serve`, `configs`) and imports nothing heavy, so `attncli --help`
starts without TensorFlow; each `*_command` module holds one command's body
(`train_failures` explains a training stopped by the machine, `align_inputs` reads
`align`'s pairs and gold links, `line_stream` feeds `translate` line by line), `engines`
the `--engine` choice of `translate` and `serve`, and `runs` what several commands read
the same way. `render` draws attention steps (`attncli.model.trace.AttentionStep`, for
`inspect-weights --step` and `score-demo`) as tables, Markdown or JSON, `progress` and
`heatmap` progress lines and PNG pictures (`fonts` for the scripts matplotlib's default
font lacks), and `tables` cuts a table wider than the terminal into blocks of columns;
`score_demo` and `demo_inputs` run the articles' worked examples step by step.
"""
