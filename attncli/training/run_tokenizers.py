"""A run's tokenizers: read back on resume, copied from the model it starts from, or
learned from its training text."""

from pathlib import Path

from attncli.data.tokenization import Tokenizer, learn_tokenizer
from attncli.errors import AttncliError
from attncli.model.saving import CONFIG_FILE, WEIGHTS_FILE, model_files


def prepare_tokenizers(config, run, splits, resume, init_from=None, data_dir=None):
    """The run's tokenizers: read back on resume, else copied from the kept model of
    `init_from` (an `InitFrom`) if given, else learned from the training side (or read
    from the files a side names, relative to `data_dir`, else `data.directory`).

    With `data.shared_vocab` one tokenizer, its vocabulary learned from both sides'
    training text, serves both sides; it is saved under both names, so a run reads
    its two sides back as it always has.
    """
    names = ("source", "target")
    # A side at the sentencepiece level also keeps its `.model` (as `model_files` says).
    files = [run.path / name for name in model_files(run.path)
             if name not in (CONFIG_FILE, WEIGHTS_FILE)]
    if resume and (run.has_progress() or any(path.exists() for path in files)):
        # The run's model was built on these vocabularies: they are never learned again.
        missing = [path.name for path in files if not path.exists()]
        if missing and not run.has_progress():
            raise AttncliError(
                f"{run.path} stopped while its vocabularies were written, before training "
                f"({missing[0]} is missing): there is nothing to resume; start it again "
                "with --overwrite"
            )
        if missing:
            kept = all((run.model_dir / name).is_file() for name in missing)
            raise AttncliError(
                f"{run.path / missing[0]} is missing"
                + (f" (and {', '.join(missing[1:])})" if missing[1:] else "")
                + "; the run cannot go on without the vocabularies it trained with: put "
                + (f"them back (its model keeps a copy in {run.model_dir.name}/)" if kept
                   else "them back")
                + ", or start again with --overwrite"
            )
        return tuple(Tokenizer.load(run.path, name) for name in names)
    if init_from is not None:
        tokenizers = tuple(Tokenizer.load(init_from.model_dir, name) for name in names)
        for name, tokenizer in zip(names, tokenizers):
            tokenizer.save(run.path, name)
        return tokenizers
    data, train = config.data, splits.train
    base = Path(data_dir or data.directory or ".")
    if data.shared_vocab:
        # The sides are tokenized alike: `DataConfig` checked it.
        shared = learn_tokenizer(data.source, list(train.sources) + list(train.targets), base)
        tokenizers = (shared, shared)
    else:
        tokenizers = (
            learn_tokenizer(data.source, train.sources, base),
            learn_tokenizer(data.target, train.targets, base),
        )
    for name, tokenizer in zip(names, tokenizers):
        tokenizer.save(run.path, name)
    return tokenizers
