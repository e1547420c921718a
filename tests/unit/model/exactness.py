"""The one exactness check the model's tests share: learn_many, in any cuts, is learn_one."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from stream_perceptron import Perceptron


def learned(model: Perceptron, x, y, **kwargs) -> bool:
    """learn_one(x, y), then whether it was a mistake (:attr:`Perceptron.last_mistake`)."""
    model.learn_one(x, y, **kwargs)
    return model.last_mistake


def assert_learn_many_is_learn_one(
    make: Callable[[], Perceptron], rows, y, cuts: int
) -> tuple[Perceptron, Perceptron]:
    """Row by row with learn_one (scoring each row first), then the batch path cut into ``cuts``
    batches on a second model: the same flags, bit-identical served scores and the same state
    (decisions must not depend on the cuts). Returns (learn_one's model, learn_many's)."""
    one, many = make(), make()
    flags, scores = [], []
    for i in range(len(rows)):
        scores.append(one.score_one(rows[i]))
        flags.append(learned(one, rows[i], int(y[i])))
    edges = sorted({0, len(rows), *np.linspace(0, len(rows), cuts + 1).astype(int).tolist()})
    got_flags, got_scores, got_norms = [], [], []
    for a, b in zip(edges, edges[1:], strict=False):
        out = many.learn_many(rows[a:b], y[a:b])  # a matrix, or named rows held sparse
        got_flags += out.mistakes.tolist()
        got_scores += out.served_scores.tolist()
        got_norms += [*out.theta_norm.tolist(), *out.theta_norm_aug.tolist()]
    assert got_flags == flags
    assert got_scores == scores  # bit-identical: one summation order on every path
    whole = make().learn_many(rows, y)  # ‖θ‖ of each row does not depend on the cuts either
    assert got_norms == [
        v for a, b in zip(edges, edges[1:], strict=False)
        for v in [*whole.theta_norm[a:b].tolist(), *whole.theta_norm_aug[a:b].tolist()]
    ]
    assert json.dumps(one.get_state()) == json.dumps(many.get_state())
    return one, many
