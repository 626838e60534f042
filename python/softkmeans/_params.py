"""The parameters of a fit: their names, defaults and checks, written once.

`SoftKMeans` takes its constructor defaults from `DEFAULTS`, the ``softkmeans cluster``
command its option defaults, and the fitting driver checks them with `FitParams.check`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from . import _validation as v
from .annealing import AnnealingSchedule, check_schedule

__all__ = ["DEFAULTS", "DEFAULT_SIGMA_FRACTION", "FitParams"]

# sigma=None: sigma = DEFAULT_SIGMA_FRACTION x critical_sigma(X).
DEFAULT_SIGMA_FRACTION = 0.1

INITS = ("k-means++", "random")


class Resolved(NamedTuple):
    """What `FitParams.check` derives: the checked values a fit runs with."""

    n_clusters: int
    kind: str
    schedule: AnnealingSchedule | None
    init: Any  # "k-means++", "random", a callable, or a checked (k, d) array


@dataclasses.dataclass
class FitParams:
    """The parameters of `SoftKMeans` (see its docstring for their meaning)."""

    n_clusters: int = 8
    assignment: str = "softmax"
    sigma: float | None = None
    anneal: Any = None
    init: Any = "k-means++"
    n_init: int = 1
    max_iter: int = 300
    tol: float = 1e-4
    random_state: Any = None
    n_threads: int | None = None
    verbose: int = 0

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def of(cls, obj) -> FitParams:
        """The parameters held as attributes of `obj` (an estimator)."""
        return cls(**{name: getattr(obj, name) for name in cls.names()})

    def check(self, X) -> Resolved:
        """Check every parameter against validated data X (n, d); raise on the first bad one."""
        n = X.shape[0]
        k = v.check_int(self.n_clusters, "n_clusters", 1)
        if n < k:
            raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
        if not isinstance(self.assignment, str) or self.assignment not in v.KINDS:
            raise ValueError(f"assignment must be one of {v.KINDS}; got {self.assignment!r}")
        if self.sigma is not None:
            v.check_sigma(self.sigma, "softmax")
        schedule = check_schedule(self.anneal)
        v.check_int(self.n_init, "n_init", 1)
        v.check_int(self.max_iter, "max_iter", 1)
        v.check_real(self.tol, "tol", minimum=0.0)
        v.check_n_threads(self.n_threads)
        v.check_int(self.verbose, "verbose", 0)
        init = self.init
        if isinstance(init, str):
            if init not in INITS:
                raise ValueError(
                    f"init must be 'k-means++', 'random', an array or a callable; got {init!r}"
                )
        elif not callable(init):
            init = v.check_centroids(init, X, name="init")
            if init.shape[0] != k:
                raise ValueError(
                    f"init has {init.shape[0]} centroids but n_clusters={k}; they must match"
                )
        return Resolved(k, self.assignment, schedule, init)


DEFAULTS = FitParams()
