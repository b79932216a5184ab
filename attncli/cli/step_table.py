"""One attention step (`attncli.model.trace.AttentionStep`) as the worked-example table
of `score-demo`: each key's score, softmax weight and weighted value, and their sum.

A recurrent decoder's step is laid out as the seq2seq example (query `s_{t-1}` or
`h_t`, encoder states `h̄_s`; steps 1-4), and so is the alignment layer's (its title
says so; query `q_t`, score `q_t · (h_s W_a)`), a head of a multi-head attention as the
self-attention example (input `x`, `q = x W_q + b_q`, `k_s`, `v_s`; steps 1-7).
"""

import numpy as np
from rich.table import Table
from rich.text import Text


def short(vector, decimals, shown=4):
    """`[v_1, .., v_4, …] ‖v‖`: a vector's first components and its norm."""
    head = ", ".join(f"{value:.{decimals}f}" for value in vector[:shown])
    more = ", …" if len(vector) > shown else ""
    return f"[{head}{more}] ‖{np.linalg.norm(vector):.{decimals}f}‖"


def _number(value, decimals):
    """A score with `decimals` digits; a masked one (-inf) as `-inf`."""
    return f"{value:.{decimals}f}" if np.isfinite(value) else "-inf"


def step_table(step, decimals=4, previous_token=None):
    """The table of `step`; `previous_token` names a recurrent decoder's input."""
    if step.inputs is None:
        return _recurrent_table(step, decimals, previous_token)
    return _multi_head_table(step, decimals)


def _recurrent_table(step, decimals, previous_token):
    # The alignment layer's step reads as a recurrent decoder's: one query over h_s.
    named = "alignment layer: " if step.attention == "alignment" else ""
    table = Table(
        title=Text(
            f"{named}output token {step.step} {step.query_token!r} "
            f"(after {previous_token!r}); score: {step.score}; "
            f"query {short(step.query, decimals)}"
        ),
    )
    if "local" in step.score:
        table.caption = Text(
            "1. is the score of every position, -inf outside the window; 2. is the "
            "weight the model used: the softmax over the window only (local-p: times "
            "the Gaussian, so it sums below 1)"
        )
    table.add_column("s", justify="right")
    table.add_column("source token")
    table.add_column("encoder hidden h̄_s")
    table.add_column("1. score", justify="right")
    table.add_column("2. softmax", justify="right")
    table.add_column("3. alignment a_s·h̄_s")
    best = int(np.argmax(step.weights))
    weighted = step.weighted_values()
    for s, token in enumerate(step.key_tokens):
        table.add_row(
            str(s + 1), Text(token), short(step.values[s], decimals),
            _number(step.scores[s], decimals), f"{step.weights[s]:.{decimals}f}",
            short(weighted[s], decimals), style="bold" if s == best else None,
        )
    table.add_section()
    table.add_row("4. sum", "", "", "", f"{step.weights.sum():.{decimals}f}",
                  "context " + short(step.context, decimals))
    return table


def _multi_head_table(step, decimals):
    table = Table(title=Text(
        f"{step.attention} attention, layer {step.layer}, head {step.head}: query "
        f"{step.step} {step.query_token!r}\n1. input x {short(step.x, decimals)}\n"
        f"2. query q = x W_q + b_q {short(step.query, decimals)}"
    ))
    table.caption = Text(
        f"4. score = {step.formula}; 5. softmax over the positions it may see; 6. weight "
        "× value; 7. their sum is the head's output (before W_o); 8. every other query "
        "repeats 4-7 (the rows of the matrix above)"
    )
    for name in ("s", "token", "input x_s", "3. key x_s W_k + b_k",
                 "3. value x_s W_v + b_v", "4. score", "5. softmax", "6. weighted value"):
        table.add_column(name, justify="right" if name in ("s", "4. score", "5. softmax")
                         else "left")
    best = int(np.argmax(step.weights))
    weighted = step.weighted_values()
    for s, token in enumerate(step.key_tokens):
        masked = not np.isfinite(step.scores[s])  # padding or a later position
        table.add_row(
            str(s + 1), Text(token), short(step.inputs[s], decimals),
            short(step.keys[s], decimals), short(step.values[s], decimals),
            _number(step.scores[s], decimals), f"{step.weights[s]:.{decimals}f}",
            short(weighted[s], decimals),
            style="bold" if s == best else ("dim" if masked else None),
        )
    table.add_section()
    table.add_row("7. sum", "", "", "", "", "", f"{step.weights.sum():.{decimals}f}",
                  "output " + short(step.context, decimals))
    return table
