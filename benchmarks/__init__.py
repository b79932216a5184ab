"""Scripts that measure attncli, each against its baseline in the same process.

Each prints a table; run one from the repository root as `python -m benchmarks.NAME`
(`python -m benchmarks.bench_layers --help` lists its options). They are not installed
with the package.
"""
