"""Self-attention in the encoder-decoder: training and decoding speed, as ratios in one run.

One process, the bundled Tatoeba Spanish -> English pairs (word level, the tutorial's
normalisation, vocabularies of 5,000 per side, bucketed batches of 64 from
`attncli.data.pipeline`), every model seeded alike. Three tables:

1. Training, target tokens/s (non-pad target tokens, end of sentence included): the
   self-attention encoder against the recurrent one under the same Luong decoder (the
   hybrid of configs/hybrid.yaml against the RNN model of configs/default.yaml, the TF
   tutorial's size), on the same batches, models in turns batch by batch, the fastest
   of `--repeats` runs of each batch counting (another process only ever slows a step).
2. Training: the full Transformer of configs/transformer.yaml against the same
   tutorial-sized RNN model.
3. Decoding, sentences/s: greedy and beam-5 search (`compile_search`, one
   `tf.while_loop` per batch) over the Transformer's decoder with its key/value cache
   against the same search recomputing the whole prefix at every step
   (`PrefixRecomputingModel`). The models are briefly trained first (`--train-steps`)
   so that they end sentences as a trained model does.

    python -m benchmarks.bench_self_attention [--steps 30] [--train-steps 300]
"""

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from attncli.config.model import ModelConfig  # noqa: E402
from attncli.config.run import load_run_config  # noqa: E402
from attncli.config.search import SearchConfig  # noqa: E402
from attncli.config.training import TrainingConfig  # noqa: E402
from attncli.data.corpora import read_bundled, split_corpus  # noqa: E402
from attncli.data.pipeline import make_dataset  # noqa: E402
from attncli.data.tokenization import TUTORIAL_NORMALIZATION, Tokenizer  # noqa: E402
from attncli.model.encoder_decoder import Seq2Seq  # noqa: E402
from attncli.search.decoding import compile_search  # noqa: E402
from attncli.search.growing_state import PrefixRecomputingModel  # noqa: E402
from attncli.training.optimizer_setup import make_optimizer  # noqa: E402
from attncli.training.steps import make_train_step  # noqa: E402

VOCAB_SIZE = 5000
CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def batches(count):
    """`count` training batches of the bundled corpus, and the tokenizers."""
    train = split_corpus(read_bundled("spa"), valid=2000, seed=0).train
    tokenizers = []
    for texts in (train.sources, train.targets):
        tokenizer = Tokenizer("word", **TUTORIAL_NORMALIZATION)
        tokenizers.append(tokenizer.with_vocabulary(
            tokenizer.build_vocabulary(texts, max_size=VOCAB_SIZE)))
    dataset = make_dataset(train, *tokenizers, batch_size=64, bucketing=True, seed=1)
    return list(dataset.take(count))


def model_of(config_name):
    """The model of a shipped config, with this benchmark's vocabularies."""
    options = load_run_config(CONFIGS / config_name).model
    keras.utils.set_random_seed(0)
    return Seq2Seq(ModelConfig(VOCAB_SIZE, VOCAB_SIZE, **options))


def train_step(model):
    config = TrainingConfig(label_smoothing=0.1, clip_norm=5.0)
    return make_train_step(model, make_optimizer(config), config)


def training_rates(steps, data, warmup, repeats):
    """Target tokens/s of each step function, fastest of `repeats` per batch, in turns."""
    names = list(steps)
    for name in names:
        for batch in data[:warmup]:
            steps[name](*batch)["loss"].numpy()
    seconds = dict.fromkeys(names, 0.0)
    tokens = 0
    for index, batch in enumerate(data[warmup:]):
        tokens += int(np.sum(batch[1].numpy() != 0))
        for name in names[index % len(names):] + names[: index % len(names)]:
            runs = []
            for _ in range(repeats):
                start = time.perf_counter()
                steps[name](*batch)["loss"].numpy()
                runs.append(time.perf_counter() - start)
            seconds[name] += min(runs)
    return {name: tokens / seconds[name] for name in names}


def decoding_rates(searches, sources, repeats):
    """Sentences/s of each search over the same source batches, fastest of `repeats`."""
    for search in searches.values():
        search(sources[0])
    seconds = dict.fromkeys(searches, 0.0)
    for batch in sources:
        for name, search in searches.items():
            runs = []
            for _ in range(repeats):
                start = time.perf_counter()
                search(batch).token_ids.numpy()
                runs.append(time.perf_counter() - start)
            seconds[name] += min(runs)
    sentences = sum(int(batch.shape[0]) for batch in sources)
    return {name: sentences / seconds[name] for name in searches}


def table(title, unit, rates, baseline):
    print(f"\n{title}")
    print(f"| model | {unit} | vs {baseline} |")
    print("| --- | ---: | ---: |")
    for name, rate in rates.items():
        print(f"| {name} | {rate:,.0f} | {rate / rates[baseline]:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per model")
    parser.add_argument("--steps", type=int, default=30, help="timed training batches")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each batch")
    parser.add_argument("--train-steps", type=int, default=300,
                        help="training steps of the Transformer before decoding")
    parser.add_argument("--decode-batches", type=int, default=4,
                        help="batches of 64 sentences decoded")
    args = parser.parse_args()

    data = batches(max(args.warmup + args.steps, args.train_steps))
    models = {"rnn (default.yaml)": model_of("default.yaml"),
              "hybrid (hybrid.yaml)": model_of("hybrid.yaml"),
              "transformer (transformer.yaml)": model_of("transformer.yaml")}
    steps = {name: train_step(model) for name, model in models.items()}
    rates = training_rates(steps, data[: args.warmup + args.steps], args.warmup, args.repeats)
    baseline = "rnn (default.yaml)"
    table("Training: self-attention encoder against the bi-GRU encoder (Luong decoder)",
          "target tokens/s", {name: rates[name] for name in list(rates)[:2]}, baseline)
    table("Training: the Transformer against the tutorial-sized RNN model",
          "target tokens/s", {name: rates[name] for name in (baseline, list(rates)[2])},
          baseline)

    transformer = models["transformer (transformer.yaml)"]
    step = steps["transformer (transformer.yaml)"]
    for batch in data[args.warmup + args.steps: args.train_steps]:
        step(*batch)
    sources = [batch[0][0] for batch in data[: args.decode_batches]]
    recomputing = PrefixRecomputingModel(transformer)
    searches = {}
    for beam in (1, 5):
        label = "greedy" if beam == 1 else f"beam {beam}"
        search = SearchConfig(beam_size=beam)
        searches[f"{label}, cache"] = compile_search(transformer, search)
        searches[f"{label}, recomputed prefix"] = compile_search(recomputing, search)
    rates = decoding_rates(searches, sources, args.repeats)
    for label in ("greedy", "beam 5"):
        table(f"Decoding ({label}): the self-attention decoder with and without its cache",
              "sentences/s", {name: rate for name, rate in rates.items()
                              if name.startswith(label)}, f"{label}, recomputed prefix")


if __name__ == "__main__":
    main()
