"""A server's traced searches are bounded in number and in memory: a translator dropped
from the cache frees the graphs it traced (the 0.1.0 run is recurrent: its scans trace
`tf.custom_gradient`s, whose gradient functions TensorFlow keeps in a global registry,
holding their graphs)."""

import gc
import weakref

import pytest
from attncli_process import FIXTURE_RUN
from tensorflow.python.framework import ops

from attncli.serve import registry as registry_module
from attncli.serve.limits import Limits
from attncli.serve.registry import Registry

pytestmark = pytest.mark.slow


def test_a_dropped_translator_frees_its_traced_graphs(monkeypatch):
    monkeypatch.setattr(registry_module, "KEPT_TRANSLATORS", 1)
    served = Registry([("run", [FIXTURE_RUN / "model"])], Limits())
    served.load()
    model = served.models["run"]
    registered = len(ops.gradient_registry.list())
    first = model.translator(model.search(3), True)
    [translation] = first.translate(["tom is here."])
    graph = weakref.ref(first.search.get_concrete_function().graph)
    assert len(ops.gradient_registry.list()) > registered  # the scans' gradients
    del first
    second = model.translator(model.search(4), True)  # the first is dropped
    gc.collect()
    assert graph() is None
    # The second's own gradient functions stay while it is kept, and it still answers.
    assert len(ops.gradient_registry.list()) > registered
    [again] = model.translator(model.search(4), True).translate(["tom is here."])
    assert again.hypotheses[0].text == second.translate(["tom is here."])[0].hypotheses[0].text
    assert translation.hypotheses[0].text
