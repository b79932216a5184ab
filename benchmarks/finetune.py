"""Fine-tuning on a domain the base model never saw: `attncli train --init-from`.

No second Spanish→English corpus exists here, so the other domain is carved out of
Tatoeba's `spa-eng/spa.txt` by a property of the sentences: every pair whose English
side names food or drink (one of `FOOD_WORDS`, a whole word, any case: "eat", "bread",
"coffee", "hungry", ...) about 5 % of the corpus. A Spanish source with any such pair
belongs to the domain with all its pairs, so the base model sees none of its sources.

    rest of spa.txt   -> base.train.tsv, base.valid.tsv (2,000 pairs: the general validation)
    the food domain   -> food.train.tsv (60 % of its sources), food.valid.tsv (300 sources,
                         chooses the fine-tuned model), food.test.tsv (the other ~40 %: scored)

Then, as a user would (each an `attncli` subprocess pinned to the cores this process has):

1. base: `attncli train base.yaml` (configs/default.yaml on base.train.tsv) for
   `--base-minutes`;
2. fine-tuned: `attncli train food.yaml --init-from base` for `--finetune-minutes` on
   food.train.tsv, at `--learning-rate`;
3. control: `attncli train base.yaml --init-from base` as long, on the base's own data:
   the same extra training without the domain;
4. every model translates the food test sources and the general validation sources
   (`attncli translate RUN --input FILE --beam 1`: greedy, as validation decodes, to keep
   the benchmark within 25 minutes of one core) and is scored by
   sacreBLEU as validation is (`attncli.search.evaluation.score_outputs`: cased BLEU and
   chrF, a source against all its references).

Files go under `--work` (never into the repository or the data folder). With `--reuse-base`
a base run already in `--work` is used as it is, so the base and the rest can be two timed
invocations:

    flock /work/core0.lock taskset -c 0 python -m benchmarks.finetune --work /tmp/ft --only-base
    flock /work/core0.lock taskset -c 0 python -m benchmarks.finetune --work /tmp/ft --reuse-base
"""

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO / "configs" / "default.yaml"
FOOD_WORDS = (
    "eat eats ate eaten eating food foods meal meals breakfast lunch dinner supper cook "
    "cooks cooked cooking kitchen restaurant bread meat fish fruit fruits vegetable "
    "vegetables apple apples orange oranges banana bananas cheese egg eggs rice soup cake "
    "cakes pie sugar salt coffee tea wine beer milk juice water drink drinks drank drinking "
    "hungry thirsty delicious taste tastes sandwich pizza chocolate candy dessert menu "
    "waiter chicken beef pork potatoes potato tomato tomatoes salad butter cookies cookie"
).split()
GENERAL_VALID = 2000
FOOD_VALID = 300
FOOD_TRAIN_SHARE = 0.6


def read_pairs(data):
    """`(english, spanish)` pairs of spa.txt, in file order."""
    pairs = []
    with open(Path(data) / "spa-eng" / "spa.txt", encoding="utf-8") as stream:
        for line in stream:
            columns = line.rstrip("\n").split("\t")
            if len(columns) >= 2 and columns[0].strip() and columns[1].strip():
                pairs.append((columns[0], columns[1]))
    return pairs


def carve(pairs, seed=0):
    """The splits, as lists of pairs: base train/valid, food train/valid/test."""
    food = re.compile(r"\b(" + "|".join(FOOD_WORDS) + r")\b", re.IGNORECASE)
    by_source = {}
    for english, spanish in pairs:
        by_source.setdefault(spanish, []).append((english, spanish))
    sources = sorted(by_source)
    in_domain = [s for s in sources if any(food.search(e) for e, _ in by_source[s])]
    domain = set(in_domain)
    general = [s for s in sources if s not in domain]
    rng = np.random.default_rng(seed)
    general = [general[i] for i in rng.permutation(len(general))]
    in_domain = [in_domain[i] for i in rng.permutation(len(in_domain))]

    def pairs_of(chosen):
        return [pair for source in chosen for pair in by_source[source]]

    valid, count = [], 0
    while count < GENERAL_VALID:
        valid.append(general.pop())
        count += len(by_source[valid[-1]])
    cut = int(FOOD_TRAIN_SHARE * len(in_domain))
    return {
        "base.train": pairs_of(general), "base.valid": pairs_of(valid),
        "food.train": pairs_of(in_domain[:cut - FOOD_VALID]),
        "food.valid": pairs_of(in_domain[cut - FOOD_VALID:cut]),
        "food.test": pairs_of(in_domain[cut:]),
    }


def write_splits(splits, work):
    """`NAME.tsv` (English<TAB>Spanish, as spa.txt) for each split; for the scored
    ones also `NAME.src` (each Spanish source once) and their references."""
    references = {}
    for name, pairs in splits.items():
        with open(work / f"{name}.tsv", "w", encoding="utf-8") as stream:
            stream.writelines(f"{english}\t{spanish}\n" for english, spanish in pairs)
        grouped = {}
        for english, spanish in pairs:
            grouped.setdefault(spanish, []).append(english)
        references[name] = grouped
    for name in ("base.valid", "food.test"):
        (work / f"{name}.src").write_text(
            "".join(f"{source}\n" for source in references[name]), encoding="utf-8"
        )
    return references


def write_configs(work, base_minutes, finetune_minutes, learning_rate):
    """base.yaml (configs/default.yaml on the base splits) and food.yaml (the same on
    the food splits, shorter and at `learning_rate`)."""
    config = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    data = config["data"]
    for key in ("bundled_source", "valid_size", "split_seed"):
        data.pop(key, None)
    data.update(format="tsv", directory=str(work), source_column=1, target_column=0)
    base = {**config, "name": "base",
            "data": {**data, "train": "base.train.tsv", "valid": "base.valid.tsv"},
            "training": {**config["training"], "max_minutes": base_minutes, "epochs": 100}}
    food = {**config, "name": "food",
            "data": {**data, "train": "food.train.tsv", "valid": "food.valid.tsv"},
            "training": {**config["training"], "max_minutes": finetune_minutes,
                         "epochs": 1000, "learning_rate": learning_rate,
                         "eval_sentences": FOOD_VALID}}
    control = {**base, "name": "control",
               "training": {**base["training"], "max_minutes": finetune_minutes,
                            "learning_rate": learning_rate}}
    for name, mapping in (("base", base), ("food", food), ("control", control)):
        (work / f"{name}.yaml").write_text(yaml.safe_dump(mapping, sort_keys=False), "utf-8")


def attncli(*args, log):
    """`python -m attncli ARGS`, stderr appended to `log`; its stdout and wall seconds."""
    started = time.monotonic()
    with open(log, "a", encoding="utf-8") as stream:
        result = subprocess.run([sys.executable, "-m", "attncli", *map(str, args)],
                                stdout=subprocess.PIPE, stderr=stream, text=True, cwd=REPO)
    if result.returncode != 0:
        sys.exit(f"attncli {' '.join(map(str, args))} failed ({result.returncode}); see {log}")
    return result.stdout, time.monotonic() - started


def score(run, name, references, work, log):
    """Figures of `run` translating `NAME.src`, against its references."""
    from attncli.search.evaluation import score_outputs

    output, seconds = attncli("translate", run, "--input", work / f"{name}.src", "--beam", "1",
                              log=log)
    outputs = output.splitlines()
    grouped = list(references[name].values())
    assert len(outputs) == len(grouped), (len(outputs), len(grouped))
    figures = score_outputs("translation", outputs, grouped, lowercase_bleu=False)
    (work / f"{Path(run).name}.{name}.out").write_text(output, encoding="utf-8")
    return {"bleu": figures["bleu"], "chrf": figures["chrf"], "seconds": seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for every file written")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--base-minutes", type=float, default=10.0)
    parser.add_argument("--finetune-minutes", type=float, default=3.0)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--reuse-base", action="store_true",
                        help="use the base run already in --work")
    parser.add_argument("--only-base", action="store_true", help="train the base run and stop")
    args = parser.parse_args()
    work = args.work.resolve()
    if work == REPO or REPO in work.parents:
        sys.exit("--work must be outside the repository")
    work.mkdir(parents=True, exist_ok=True)
    log = work / "attncli.log"

    splits = carve(read_pairs(args.data))
    references = write_splits(splits, work)
    write_configs(work, args.base_minutes, args.finetune_minutes, args.learning_rate)
    sizes = {name: (len(pairs), len(references[name])) for name, pairs in splits.items()}
    print("split          pairs  sources", file=sys.stderr)
    for name, (pairs, sources) in sizes.items():
        print(f"{name:<12} {pairs:>7} {sources:>8}", file=sys.stderr)

    seconds = {}
    if not (args.reuse_base and (work / "base" / "model").is_dir()):
        _, seconds["base"] = attncli("train", work / "base.yaml", "--run-dir", work / "base",
                                     "--overwrite", log=log)
    if args.only_base:
        return
    _, seconds["finetuned"] = attncli(
        "train", work / "food.yaml", "--run-dir", work / "finetuned",
        "--init-from", work / "base", "--overwrite", log=log,
    )
    _, seconds["control"] = attncli(
        "train", work / "control.yaml", "--run-dir", work / "control",
        "--init-from", work / "base", "--overwrite", log=log,
    )
    rows = {}
    for run in ("base", "control", "finetuned"):
        rows[run] = {name: score(work / run, name, references, work, log)
                     for name in ("food.test", "base.valid")}
    (work / "results.json").write_text(json.dumps(
        {"sizes": sizes, "train_seconds": seconds, "scores": rows,
         "args": {key: str(value) for key, value in vars(args).items()}}, indent=2) + "\n")
    print(f"| model | trained | food test BLEU | food test chrF | general valid BLEU "
          f"| general valid chrF |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    trained = {
        "base": f"{args.base_minutes:g} min on the rest of spa.txt",
        "control": f"base + {args.finetune_minutes:g} min more on the same data",
        "finetuned": f"base + {args.finetune_minutes:g} min on food.train",
    }
    for run, figures in rows.items():
        food, general = figures["food.test"], figures["base.valid"]
        print(f"| {run} | {trained[run]} | {food['bleu']:.1f} | {food['chrf']:.1f} "
              f"| {general['bleu']:.1f} | {general['chrf']:.1f} |")


if __name__ == "__main__":
    main()
