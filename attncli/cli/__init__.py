"""Command line: the Typer app and everything it prints.

`app` declares the commands (`train`, `translate`, `inspect-weights`, `score-demo`) and
imports nothing heavy, so `attncli --help` starts without TensorFlow; each
`*_command` module holds one command's body, and `runs` what several of them read the same
way. `render` draws attention steps (`attncli.model.trace.AttentionStep`, for
`inspect-weights --step` and `score-demo`) as tables, Markdown or JSON, `progress` and
`heatmap` progress lines and PNG pictures, and `tables` cuts a table wider than the
terminal into blocks of columns; `score_demo` and `demo_inputs` run the articles' worked
examples step by step.
"""
