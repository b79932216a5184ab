"""The server without a model: a `Batcher` of test settings (`batcher`), and the
application over a registry of one `FakeModel` (`fake_app`), whose translation of a text
is the text reversed."""

import threading
from types import SimpleNamespace

import numpy as np

from attncli.serve.app import create_app
from attncli.serve.batching import Batcher
from attncli.serve.limits import Limits
from attncli.serve.registry import Registry

#: Where the test clients send their requests: a name the application answers to.
LOOPBACK = "http://127.0.0.1"


def batcher(run, **settings):
    options = {"measure": lambda key, requests: [[1] * len(texts) for texts in requests],
               "run": run,
               "batch_tokens": 100, "batch_wait": 0.0, "max_queue": 1000, **settings}
    return Batcher(**options)


class FakeModel:
    """A model whose translation of a text is the text reversed, waiting for `release`."""

    levels = ("word", "word")

    def __init__(self):
        self.name = "fake"
        self.release = threading.Event()
        self.release.set()

    def decoding(self, beam=None, alpha=None, n_best=None, *unused):
        return (beam, alpha, n_best)

    def measure(self, search, requests):
        return [[1] * len(texts) for texts in requests]

    def translate(self, search, weights, texts):
        self.release.wait(30)
        return [SimpleNamespace(source_tokens=text.split(), hypotheses=[SimpleNamespace(
            text=text[::-1], score=-1.0, tokens=text[::-1].split(),
            weights=np.eye(len(text.split()), dtype=np.float32))]) for text in texts]

    def describe(self):
        """What `/models` says of it: every field of `schemas.ModelDescription`."""
        return {"name": "fake", "engine": "tensorflow", "task": "translation", "members": 1,
                "source_level": "word", "target_level": "word", "decoding": {},
                "max_length": None, "inspect_refusal": None}


def fake_app(token=None, **limits):
    registry = Registry([("fake", [])], Limits(**limits))
    registry.models = {"fake": FakeModel()}
    registry.ready = True
    return create_app(registry, registry.limits, token=token), registry.models["fake"]
