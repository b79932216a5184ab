"""What the page tests read and give the attention page: the heatmap as the page holds
it (`READ_HEATMAP`, run by Playwright's `evaluate`), the colour map it draws with
(`BLUES`), and a view of known numbers (`self_attention_view`)."""

import numpy as np
from matplotlib import colormaps

BLUES = colormaps["Blues"]
# The heatmap as the page holds it: row and column tokens, and every cell's weight.
READ_HEATMAP = """() => {
  const grid = document.querySelector("[data-heatmap]");
  const weights = Array.from({length: Number(grid.dataset.rows)},
                             () => Array(Number(grid.dataset.columns)).fill(null));
  for (const cell of grid.querySelectorAll(".cell")) {
    weights[Number(cell.dataset.row)][Number(cell.dataset.column)] = Number(cell.dataset.weight);
  }
  return {
    attention: grid.dataset.heatmap, layer: grid.dataset.layer, head: grid.dataset.head,
    rows: [...grid.querySelectorAll(".row-label .token")].map((node) => node.textContent),
    columns: [...grid.querySelectorAll(".column-label")].map((node) => node.textContent),
    weights,
  };
}"""

def self_attention_view(layers=2, heads=3):
    """A view of a model with self-attention whose weights are known: rows of random
    softmaxes, and every step with that row's weights."""
    generator = np.random.default_rng(0)
    source, output = ["el", "perro", "come", "."], ["the", "dog", "eats", ".", "[END]"]
    shapes = {"cross": (output, source), "encoder": (source, source),
              "decoder": (output, ["[START]"] + output[:-1])}
    attentions, steps = [], {}
    for name, (rows, columns) in shapes.items():
        maps = generator.random((layers, heads, len(rows), len(columns))) * 4
        maps = np.exp(maps) / np.exp(maps).sum(axis=-1, keepdims=True)
        attentions.append({"attention": name, "title": name, "rows": rows, "columns": columns,
                           "row_label": "source" if name == "encoder" else "output",
                           "column_label": "source", "layers": [
                               {"heads": maps[layer].tolist()} for layer in range(layers)]})
        for layer, head, step in np.ndindex(layers, heads, len(rows)):
            weights = maps[layer, head, step]
            vectors = generator.normal(size=(len(columns), 8))
            steps[f"{name}/{layer + 1}/{head + 1}/{step + 1}"] = {
                "attention": name, "layer": layer + 1, "head": head + 1, "step": step + 1,
                "score": "scaled_dot", "formula": "q · k / √8", "query_token": rows[step],
                "key_tokens": columns, "query": vectors[0].tolist(), "query_norm": 1.0,
                "x": vectors[0].tolist(), "x_norm": 1.0,
                "inputs": vectors.tolist(), "inputs_norms": [1.0] * len(columns),
                "keys": vectors.tolist(), "keys_norms": [1.0] * len(columns),
                "values": vectors.tolist(), "values_norms": [1.0] * len(columns),
                "scores": np.log(weights).tolist(), "weights": weights.tolist(),
                "weighted_values": (weights[:, None] * vectors).tolist(),
                "weighted_values_norms": [1.0] * len(columns),
                "context": (weights @ vectors).tolist(), "context_norm": 1.0,
                "width": 8, "shown": 8}
    view = {"source": "el perro come .", "source_tokens": source, "shown": 0,
            "hypotheses": [{"text": "the dog eats.", "tokens": output, "score": -0.5}],
            "attentions": attentions}
    return {**view, "steps": steps, "model": "known", "search": {"beam_size": 1}}
