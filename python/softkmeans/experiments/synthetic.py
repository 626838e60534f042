"""The seeded synthetic data sets of `softkmeans reproduce` (registered in `datasets`):
each family has a fixed seed, independent of PYTHONHASHSEED."""

from __future__ import annotations

import numpy as np

from ._common import Dataset

__all__ = [
    "anisotropic",
    "circles",
    "many",
    "moons",
    "overlapping",
    "separated",
    "synthetic",
    "unequal",
]


def synthetic(name, make, note):
    def load():
        rng = np.random.default_rng(_seed_of(name))
        X = make(rng)
        return Dataset(
            name=name,
            X=np.ascontiguousarray(X, dtype=np.float64),
            source="synthetic (softkmeans.experiments.datasets, seeded)",
            licence="generated (no licence)",
            standardized=False,
            real=False,
            note=note,
        )

    return load


def _seed_of(name):
    # A fixed seed per family, independent of PYTHONHASHSEED.
    return sum((i + 1) * ord(c) for i, c in enumerate(name))


def _blobs(rng, centres, n_per, scales):
    parts = [c + s * rng.standard_normal((n_per, len(c))) for c, s in zip(centres, scales)]
    return np.concatenate(parts)


def separated(rng):
    centres = np.array([[-8.0, -8.0], [8.0, -8.0], [-8.0, 8.0], [8.0, 8.0]])
    return _blobs(rng, centres, 150, [1.0] * 4)


def overlapping(rng):
    centres = np.array([[0.0, 0.0], [2.0, 0.5], [1.0, 2.0]])
    return _blobs(rng, centres, 200, [1.0] * 3)


def anisotropic(rng):
    X = _blobs(rng, np.array([[0.0, 0.0], [6.0, 2.0], [2.0, 7.0]]), 200, [1.0] * 3)
    return X @ np.array([[0.6, -0.64], [-0.41, 0.85]])


def unequal(rng):
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [4.0, 9.0]])
    return _blobs(rng, centres, 200, [0.5, 2.5, 1.2])


def many(rng):
    centres = rng.normal(scale=4.0, size=(30, 50))
    return _blobs(rng, centres, 40, [1.0] * 30)


def moons(rng, n=600, noise=0.08):
    t = rng.uniform(0, np.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    return np.column_stack([x, y]) + noise * rng.standard_normal((n, 2))


def circles(rng, n=600, noise=0.05):
    t = rng.uniform(0, 2 * np.pi, n)
    radius = np.where(rng.random(n) < 0.5, 1.0, 0.5)
    return np.column_stack([radius * np.cos(t), radius * np.sin(t)]) + noise * rng.standard_normal(
        (n, 2)
    )
