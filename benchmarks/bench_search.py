"""attncli's search against its search before issue 46 and CTranslate2, in one process.

The 2,000 held-out sentences of the bundled Spanish -> English pairs (the split of the
Transformer run's config: `valid_size` 2,000, seed 0, as every shipped spa-eng config
makes it), translated from strings to strings by `Translator.translate` in batches of
64, greedy and beam 5 (the model's own alpha and maximum lengths, `n_best` 1), by:

- attncli before: the search as it was at commit `--before` (default 7941b9d, the last
  before the search that carries only the hypotheses still translating). Its modules
  are read from git at run time (`modules_at`): every module of `attncli/search` and
  `attncli/model` that differs from that commit is imported from the commit's text
  under a private name, and the model is built from its classes, with the same
  weights. A `Translator` runs its `compile_search` in place of today's.
- attncli: today's search (`attncli.search.decoding.compile_search`).
- CTranslate2 float32 and int8: the Transformer's CTranslate2 export
  (`ExportedTranslator`, which tokenises and detokenises in Python), made with
  `attncli export RUN DIR --format ctranslate2` if it does not exist. A recurrent model
  has none.

for two models: a recurrent one (`--recurrent`, the shipped `demo` by default:
configs/demo.yaml, the default config made small) and a Transformer run
(configs/transformer.yaml's model; `--transformer RUN`). Each system translates the
whole set in turn, `--rounds` times, and its fastest round counts.

Exactness: "= before" counts the sentences whose best translation has the same tokens as
the search before gives it and a score within 1e-5 of its, batched (the timed
translations) and alone (each sentence a batch of its own, attncli's two searches only,
untimed); for CTranslate2, the same tokens (its scores are its own).

    taskset -c 1 python -m benchmarks.bench_search --transformer RUN [--recurrent demo]
"""

import argparse
import ast
import importlib.abc
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.bench_ctranslate2 import fastest_call

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SCORE_TOLERANCE = 1e-5
BEFORE = "7941b9d"
REPOSITORY = Path(__file__).resolve().parents[1]
PRIVATE = "_attncli_before"


def changed_modules(commit, folders=("attncli/search", "attncli/model")):
    """The dotted names (and paths) of the modules of `folders` that differ from `commit`
    and existed there, packages' `__init__` left out."""
    def git(*arguments):
        return subprocess.run(["git", *arguments], cwd=REPOSITORY, check=True,
                              capture_output=True, text=True).stdout.split()

    then = set(git("ls-tree", "-r", "--name-only", commit, "--", *folders))
    paths = git("diff", "--name-only", commit, "--", *folders)
    return {path[:-3].replace("/", "."): path for path in paths
            if path.endswith(".py") and not path.endswith("__init__.py") and path in then}


class _Redirect(ast.NodeTransformer):
    """Imports of the modules `names` rewritten to their private copies."""

    def __init__(self, names):
        self.names = names

    def visit_ImportFrom(self, node):
        if node.module in self.names:
            node.module = f"{PRIVATE}.{node.module}"
        elif any(f"{node.module}.{alias.name}" in self.names for alias in node.names):
            raise ValueError(f"`from {node.module} import` of a changed module: not handled")
        return node

    def visit_Import(self, node):
        if any(alias.name in self.names for alias in node.names):
            raise ValueError("`import` of a changed module: not handled")
        return node


class _GitFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `PRIVATE.<name>` from the text of `<name>` at a commit (`modules_at`)."""

    def __init__(self, commit, names):
        self.commit, self.names = commit, names

    def find_spec(self, fullname, path, target=None):
        if fullname != PRIVATE and not fullname.startswith(PRIVATE + "."):
            return None
        name = fullname[len(PRIVATE) + 1:]
        if name in self.names:
            return importlib.util.spec_from_loader(fullname, self)
        # A package on the way to a module: empty.
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def exec_module(self, module):
        name = module.__name__[len(PRIVATE) + 1:]
        if name not in self.names:
            return
        path = self.names[name]
        source = subprocess.run(["git", "show", f"{self.commit}:{path}"], cwd=REPOSITORY,
                                check=True, capture_output=True, text=True).stdout
        tree = ast.fix_missing_locations(_Redirect(self.names).visit(ast.parse(source)))
        exec(compile(tree, f"{self.commit}:{path}", "exec"), module.__dict__)


def modules_at(commit):
    """attncli's search and model modules as they were at `commit`: a function from a
    dotted name (`attncli.search.decoding`) to the module, today's if it has not changed.

    The changed modules are imported from `git show commit:path` under `PRIVATE`, their
    imports of each other redirected to those copies; Keras's registry of serialisable
    classes is left as it was (the old classes register under today's names).
    """
    import keras

    names = changed_modules(commit)
    sys.meta_path.insert(0, _GitFinder(commit, names))
    registered = dict(keras.saving.get_custom_objects())
    modules = {name: importlib.import_module(f"{PRIVATE}.{name}") for name in names}
    keras.saving.get_custom_objects().clear()
    keras.saving.get_custom_objects().update(registered)
    print(f"before ({commit}): {', '.join(sorted(names)) or 'nothing changed'}",
          file=sys.stderr)
    return lambda name: modules[name] if name in modules else importlib.import_module(name)


def model_before(loaded, directory, before):
    """The model of `loaded`, built from the classes of `before` with the same weights."""
    from attncli.model.saving import WEIGHTS_FILE, load_weights

    model = before("attncli.model.encoder_decoder").Seq2Seq(loaded.model.config)
    load_weights(model, Path(directory) / WEIGHTS_FILE, "unreadable weights")
    return model


def validation_sources(run, count):
    """The first `count` held-out source sentences of `run`'s split."""
    from attncli.config.run import load_run_config
    from attncli.data.sources import read_splits

    valid = read_splits(load_run_config(Path(run) / "config.yaml").data).valid
    return [source for source in valid.sources if source.strip()][:count]


def best(results):
    """The best hypothesis of each `Translation`: (tokens, score)."""
    return [(list(result.hypotheses[0].tokens), result.hypotheses[0].score)
            for result in results]


def same(outputs, reference, scores=True):
    """How many `(tokens, score)` of `outputs` have `reference`'s tokens and score (its
    tokens alone if not `scores`)."""
    return sum(tokens == tokens_before
               and (not scores or abs(score - score_before) <= SCORE_TOLERANCE)
               for (tokens, score), (tokens_before, score_before) in zip(outputs, reference))


def fastest(translate, sentences, rounds):
    """The fastest of `rounds` translations of `sentences`, in seconds, and its outputs."""
    seconds, results = fastest_call(translate, sentences, rounds)
    return seconds, best(results)


def translators(loaded, old_model, before, search, export):
    """The systems compared, by name: each with `translate(texts, batch_size)`."""
    from attncli.search.translation import Translator

    old = Translator(old_model, loaded.source_tokenizer, loaded.target_tokenizer, search,
                     loaded.source_end, attention_weights=False)
    # The Translator's graph calls `search` when it is first traced.
    old.search = before("attncli.search.decoding").compile_search(
        old_model, search, prefixes=True, attention_weights=False)
    systems = {"attncli before": old,
               "attncli": loaded.translator(search, attention_weights=False)}
    if export is not None:
        from attncli.export.ctranslate2_engine import ExportedTranslator

        for compute_type in ("float32", "int8"):
            systems[f"CTranslate2 {compute_type}"] = ExportedTranslator(
                export, compute_type, search=search)
    return systems


def measure(name, loaded, old_model, before, export, sentences, args):
    """The rows of one model: for greedy and beam 5, every system's speed and exactness."""
    rows = []
    for beam in (1, 5):
        search = loaded.search.adjusted(beam_size=beam, n_best=1)
        systems = translators(loaded, old_model, before, search, export)
        for system in systems.values():  # traced and warmed up once
            system.translate(sentences[:64])
        found = {label: fastest(lambda texts, s=system: s.translate(texts, batch_size=64),
                                sentences, args.rounds)
                 for label, system in systems.items()}
        base_seconds, base = found["attncli before"]
        alone = {label: best(systems[label].translate(sentences[: args.alone], batch_size=1))
                 for label in ("attncli before", "attncli") if args.alone}
        for label, (seconds, outputs) in found.items():
            row = dict(model=name, search="greedy" if beam == 1 else f"beam {beam}",
                       system=label, speed=len(sentences) / seconds,
                       ratio=base_seconds / seconds,
                       batched=same(outputs, base, scores=label.startswith("attncli")))
            if label in alone:
                row["alone"] = same(alone[label], alone["attncli before"])
            rows.append(row)
            print(row, file=sys.stderr)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transformer", required=True,
                        help="a trained run of configs/transformer.yaml")
    parser.add_argument("--export", help="its CTranslate2 export (made if missing; "
                                         "default: RUN-ctranslate2)")
    parser.add_argument("--recurrent", default="demo",
                        help="a recurrent run or model directory (default: demo)")
    parser.add_argument("--before", default=BEFORE,
                        help=f"the commit whose search is the baseline (default: {BEFORE})")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--alone", type=int, default=2000,
                        help="sentences also translated one at a time (default: 2000)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    run = Path(args.transformer)
    export = Path(args.export or f"{run}-ctranslate2")
    if not export.exists():
        subprocess.run([sys.executable, "-m", "attncli", "export", str(run), str(export),
                        "--format", "ctranslate2"], check=True)

    from attncli.cli.runs import model_directory
    from attncli.search.loading import load_model

    before = modules_at(args.before)
    sentences = validation_sources(run, args.sentences)
    args.alone = min(args.alone, len(sentences))
    print(f"{len(sentences)} spa-eng validation sentences, batches of 64, running on CPUs "
          f"{sorted(os.sched_getaffinity(0))}", file=sys.stderr)
    rows = []
    for name, directory, model_export in (
        ("recurrent", model_directory(args.recurrent), None),
        ("Transformer", model_directory(run), export),
    ):
        loaded = load_model(directory)
        print(f"{name}: {directory} ...", file=sys.stderr)
        rows += measure(name, loaded, model_before(loaded, directory, before), before,
                        model_export, sentences, args)

    print(f"\n{len(sentences)} sentences; = before: same tokens and score within "
          f"{SCORE_TOLERANCE:g} as the search of {args.before} (CTranslate2: same tokens), "
          f"batched / alone (first {args.alone})\n")
    print("| model | search | system | sentences/s | × before | = before, batched | alone |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for row in rows:
        alone = f"{row['alone']}/{args.alone}" if "alone" in row else ""
        print(f"| {row['model']} | {row['search']} | {row['system']} | {row['speed']:,.0f} "
              f"| {row['ratio']:.2f} | {row['batched']}/{len(sentences)} | {alone} |")


if __name__ == "__main__":
    main()
