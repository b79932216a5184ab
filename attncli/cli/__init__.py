"""Command line: the Typer app and everything it prints.

`app` declares the commands (`train`, `translate`, `inspect-weights`, `score-demo`) and
imports nothing heavy, so `attncli --help` starts without TensorFlow; each
`*_command` module holds one command's body. `render`, `progress` and `heatmap` draw Rich
tables, progress lines and PNG pictures; `score_demo` and `demo_inputs` run the textbook
examples step by step.
"""
