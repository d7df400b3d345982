"""Gateway linkability: how well the central entity (CE) guesses which gateway sent a tuple.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> gw = rng.integers(0, 4, 4000)
>>> sender = np.column_stack([gw, rng.integers(0, 10, 4000)])  # sender = gateway
>>> gateway_linkability(gw, sender, [4, 10], 4, rng.integers(0, 2, 4000))["accuracy"]
1.0
>>> blind = np.column_stack([rng.integers(0, 4, 4000)])  # a feature unrelated to the gateway
>>> r = gateway_linkability(gw, blind, [4], 4, rng.integers(0, 2, 4000))
>>> abs(r["balanced_accuracy"] - 0.25) < 0.03
True

Design: docs/design/simulation.md
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

FEATURES = ("sender", "position_decile", "value")


def gateway_linkability(labels: np.ndarray, features: np.ndarray, cardinality: Sequence[int],
                        n_gateways: int, fold: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """Score the naive Bayes adversary on ``features`` (``(N, F)`` ints, column ``f`` in
    ``0 .. cardinality[f] - 1``) against the true ``labels`` (gateways ``0 .. n - 1``), two
    folds by ``fold`` (0/1). Ties are broken at random (``seed``).

    Args:
        labels: each tuple's true gateway.
        features: the tuples' features, ``(N, F)`` ints.
        cardinality: the number of values of each feature.
        n_gateways: the number of gateways.
        fold: each tuple's fold (0 or 1).
        seed: the seed of the tie-breaking.
    """
    labels = np.asarray(labels, dtype=np.int64)
    G = int(n_gateways)
    out: dict[str, Any] = {"tuples": len(labels), "floor": round(1.0 / G, 6)}
    if len(labels) == 0:
        return {**out, "accuracy": None, "balanced_accuracy": None, "majority_share": None}
    features = np.asarray(features, dtype=np.int64).reshape(len(labels), -1)
    fold = np.asarray(fold, dtype=np.int64)
    rng = np.random.default_rng(seed)
    predicted = np.empty(len(labels), dtype=np.int64)
    for test in (0, 1):
        tr, te = fold != test, fold == test
        if not te.any():
            continue
        score = rng.uniform(0, 1e-9, (int(te.sum()), G))  # random tie-breaking
        for f, card in enumerate(cardinality):
            counts = np.bincount(features[tr, f] * G + labels[tr],
                                 minlength=card * G).reshape(card, G).astype(np.float64)
            loglik = np.log(counts + 1.0) - np.log(counts.sum(axis=0) + card)
            score += loglik[features[te, f]]
        predicted[te] = np.argmax(score, axis=1)
    hit = predicted == labels
    per_gw = np.bincount(labels, weights=hit, minlength=G)
    size = np.bincount(labels, minlength=G)
    present = size > 0
    return {**out, "accuracy": round(float(hit.mean()), 6),
            "balanced_accuracy": round(float((per_gw[present] / size[present]).mean()), 6),
            "majority_share": round(float(size.max() / len(labels)), 6)}


def fold_of(cycles: np.ndarray) -> np.ndarray:
    """The fold (0/1) of each cycle: a bit of a multiplicative hash of the cycle number.

    >>> fold_of(np.arange(8)).tolist()
    [0, 1, 0, 0, 1, 1, 0, 0]
    """
    c = np.asarray(cycles, dtype=np.uint64)
    return ((c * np.uint64(2654435761)) >> np.uint64(16) & np.uint64(1)).astype(np.int64)


def channel(sender: np.ndarray, decile: np.ndarray) -> np.ndarray:
    """Sender and position decile as one categorical feature (cardinality ``10 x n``)."""
    return np.asarray(sender, dtype=np.int64) * 10 + np.asarray(decile, dtype=np.int64)


def position_decile(position: np.ndarray, batch_size: np.ndarray) -> np.ndarray:
    """The decile (0..9) of a position ``0 .. size - 1`` in its frame.

    >>> position_decile(np.array([0, 4, 9, 0]), np.array([10, 10, 10, 1])).tolist()
    [0, 4, 9, 0]
    """
    return np.minimum(9, (10 * np.asarray(position)) // np.maximum(1, np.asarray(batch_size)))
