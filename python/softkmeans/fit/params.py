"""The parameters of a fit: their names, defaults and checks, written once.

`SoftKMeans` takes its constructor defaults from `DEFAULTS`, the ``softkmeans cluster``
command its option defaults, and the fitting driver checks them with `FitParams.check`.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, NamedTuple

import numpy as np

from .. import _validation as v
from .._stats import STREAM_MEMORIES
from .annealing_schedule import AnnealingSchedule, check_conflicts, check_schedule
from .metric import POLICIES, metric_of

__all__ = [
    "AUTO",
    "DEFAULTS",
    "DEFAULT_SIGMA",
    "DEFAULT_SIGMA_FRACTION",
    "FitParams",
    "InvalidParameterError",
    "is_auto",
    "runs_of",
    "tolerance_of",
    "width_of",
]

# sigma=None: sigma = DEFAULT_SIGMA_FRACTION x critical_sigma(X).
DEFAULT_SIGMA_FRACTION = 0.1
# The default sigma: "auto" where the mixture's width is defined, else None
# (`FitParams.default_width`).
DEFAULT_SIGMA = "default"

INITS = ("k-means++", "k-means||", "random")
ALGORITHMS = ("lloyd", "elkan")
_INIT_ALLOWED = "a str among {'k-means++', 'k-means||', 'random'}, a callable or an array-like"

# n_init="auto" (scikit-learn's meaning): runs per init method. One k-means++ seeding is
# as good as the best of several random ones; an array is a single start; "random" and a
# callable (which may be random) get 10.
AUTO_N_INIT_RANDOM = 10


class InvalidParameterError(ValueError, TypeError):
    """A constructor parameter with a bad type or value.

    Both a ValueError and a TypeError, as scikit-learn's own InvalidParameterError, so
    code written against ``sklearn.cluster.KMeans`` that catches either keeps working.
    """


def _sklearn_phrase(name, allowed, value):
    """scikit-learn's wording for a bad parameter (its `validate_params` message)."""
    return f"The {name!r} parameter of SoftKMeans must be {allowed}. Got {value!r} instead."


# n_clusters="auto" (the phase diagram's k) and sigma="auto" (the mixture's width).
AUTO = "auto"


def is_auto(value):
    """The parameter (n_clusters or sigma) is "auto"."""
    return isinstance(value, str) and value == AUTO


def _is_default(sigma):
    return isinstance(sigma, str) and sigma == DEFAULT_SIGMA


def _is_array_like(init):
    """scikit-learn's `_is_arraylike_not_scalar`: a list, an array, anything with a shape."""
    is_array_like = hasattr(init, "__len__") or hasattr(init, "shape") or hasattr(init, "__array__")
    return is_array_like and not np.isscalar(init)


def check_init_centers(centers, X, k):
    """An initial-centers array-like (k, d) in the dtype of X, with scikit-learn's messages."""
    centers = v.as_float_array(centers, "init", ndim=2, dtype=X.dtype, magnitude=True)
    if centers.shape[0] != k:
        raise ValueError(
            f"The shape of the initial centers {centers.shape} does not match the number of "
            f"clusters {k}."
        )
    if centers.shape[1] != X.shape[1]:
        raise ValueError(
            f"The shape of the initial centers {centers.shape} does not match the number of "
            f"features of the data {X.shape[1]}."
        )
    return centers


class Resolved(NamedTuple):
    """What `FitParams.check` derives: the checked values a fit runs with."""

    n_clusters: int
    kind: str
    schedule: AnnealingSchedule | None
    init: Any  # "k-means++", "k-means||", "random", a callable, or a checked (k, d) array
    n_init: int  # runs, "auto" resolved


@dataclasses.dataclass
class FitParams:
    """The parameters of `SoftKMeans` (see its docstring for their meaning)."""

    n_clusters: int = 8
    assignment: str = "softmax"
    sigma: float | str | None = DEFAULT_SIGMA
    anneal: Any = None
    init: Any = "k-means++"
    n_init: Any = "auto"
    max_iter: int = 300
    tol: float = 1e-4
    random_state: Any = None
    n_threads: int | None = None
    verbose: int = 0
    copy_x: bool = True
    algorithm: str = "lloyd"
    stream_memory: str = "sqrt"
    decay: float = 0.0
    metric: str = "euclidean"
    max_clusters: int = 10  # n_clusters="auto" only (softkmeans.fit.phase_diagram)

    balance: Any = None
    max_cluster_size: Any = None

    max_points_per_centroid: int | None = None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def of(cls, obj) -> FitParams:
        """The parameters held as attributes of `obj` (an estimator)."""
        return cls(**{name: getattr(obj, name) for name in cls.names()})

    def check(self, X) -> Resolved:
        """Check every parameter against validated data X (n, d); raise on the first bad one.

        A bad parameter raises InvalidParameterError (a ValueError and a TypeError, as
        scikit-learn's); too few samples, and an init of the wrong shape, a ValueError with
        scikit-learn's message.
        """
        try:
            k = v.check_int(self.n_clusters, "n_clusters", 1)
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(str(exc)) from None
        n = X.shape[0]
        if n < k:
            raise ValueError(f"n_samples={n} should be >= n_clusters={k}.")
        try:
            schedule = self._check_scalars()
        except InvalidParameterError:
            raise
        except (TypeError, ValueError) as exc:  # our own wording, scikit-learn's class
            raise InvalidParameterError(str(exc)) from None
        init = self.init
        if isinstance(init, str):
            if init not in INITS:
                raise InvalidParameterError(_sklearn_phrase("init", _INIT_ALLOWED, init))
        elif callable(init):
            pass
        elif _is_array_like(init):
            init = check_init_centers(init, X, k)
        else:
            raise InvalidParameterError(_sklearn_phrase("init", _INIT_ALLOWED, init))
        return Resolved(k, self.assignment, schedule, init, self._resolve_n_init(k, schedule))

    def default_width(self, schedule, stream=False) -> FitParams:
        """These parameters with sigma="default" resolved: "auto" (the width of the
        equal-weight isotropic Gaussian mixture, re-estimated by EM, so that predict_proba is
        its posterior) wherever that is defined -- a softmax fit, Euclidean, neither
        annealed, balanced nor streamed -- and None (0.1 x critical_sigma) elsewhere.

        Why (issue 36, item 12; bench/default_sigma.py): 0.1 x critical gave one-hot
        memberships (mean max probability 0.99-1.00 on seven data sets, held-out log-loss
        0.97 on iris, 1.22 on wine); the mixture's width 0.31 and 0.19 (GaussianMixture
        spherical: 0.50 and 0.12), at fewer iterations.
        """
        if not _is_default(self.sigma):
            return self
        mixture = (
            self.assignment == "softmax"
            and self.metric == "euclidean"
            and schedule is None
            and self.balance is None
            and self.max_cluster_size is None
            and not stream
        )
        return dataclasses.replace(self, sigma="auto" if mixture else None)

    def _check_scalars(self):
        """The parameters that do not depend on the data; returns the annealing schedule."""
        self.metric_policy()
        if not isinstance(self.assignment, str) or self.assignment not in v.KINDS:
            raise ValueError(f"assignment must be one of {v.KINDS}; got {self.assignment!r}")
        sigma = None if _is_default(self.sigma) else self.sigma
        if isinstance(sigma, str):
            if sigma != "auto":
                allowed = "a real number > 0, None or 'auto' (or 'default', the default)"
                raise ValueError(f"sigma must be {allowed}; got {self.sigma!r}")
            if self.assignment != "softmax" or self.metric != "euclidean":
                raise ValueError(
                    "sigma='auto' is the variance of a Gaussian mixture, whose posterior is the "
                    "softmax map: it needs assignment='softmax' and metric='euclidean'; got "
                    f"assignment={self.assignment!r}, metric={self.metric!r}"
                )
        elif sigma is not None:
            v.check_sigma(sigma, "softmax")
        schedule = None
        if self.anneal is not None:  # annealing is consulted only when asked for
            schedule = check_schedule(self.anneal)
            check_conflicts(schedule, sigma=sigma, assignment=self.assignment)
        if not (isinstance(self.n_init, str) and self.n_init == "auto"):
            if isinstance(self.n_init, str) or not _is_int(self.n_init) or self.n_init < 1:
                allowed = "a str among {'auto'} or an int in the range [1, inf)"
                raise InvalidParameterError(_sklearn_phrase("n_init", allowed, self.n_init))
        v.check_int(self.max_iter, "max_iter", 1)
        v.check_int(self.max_clusters, "max_clusters", 2)
        v.check_real(self.tol, "tol", minimum=0.0)
        v.check_n_threads(self.n_threads)
        # scikit-learn's "verbose": an int >= 0 or a bool.
        if not isinstance(self.verbose, (bool, np.bool_)):
            v.check_int(self.verbose, "verbose", 0)
        if not isinstance(self.copy_x, (bool, np.bool_)):
            allowed = "an instance of 'bool' or an instance of 'numpy.bool'"
            raise InvalidParameterError(_sklearn_phrase("copy_x", allowed, self.copy_x))
        if not isinstance(self.algorithm, str) or self.algorithm not in ALGORITHMS:
            allowed = "a str among {'lloyd', 'elkan'}"
            raise InvalidParameterError(_sklearn_phrase("algorithm", allowed, self.algorithm))
        if not isinstance(self.stream_memory, str) or self.stream_memory not in STREAM_MEMORIES:
            allowed = "a str among {'sqrt', 'all'}"
            raise InvalidParameterError(
                _sklearn_phrase("stream_memory", allowed, self.stream_memory)
            )
        if (
            isinstance(self.decay, (bool, np.bool_))
            or not isinstance(self.decay, (int, float, np.integer, np.floating))
            or not 0.0 <= self.decay <= 1.0
        ):
            allowed = "a float in the range [0.0, 1.0]"
            raise InvalidParameterError(_sklearn_phrase("decay", allowed, self.decay))
        v.check_int(self.max_points_per_centroid, "max_points_per_centroid", 1, allow_none=True)
        return schedule

    def metric_policy(self):
        """The fit's metric (`softkmeans.fit.metric`); InvalidParameterError naming
        ``metric`` for an unknown one."""
        if isinstance(self.metric, str) and self.metric in POLICIES:
            return POLICIES[self.metric]  # a table: a known metric calls nothing
        try:
            return metric_of(self.metric)  # raises, naming ``metric``
        except ValueError as exc:
            raise InvalidParameterError(str(exc)) from None

    def _resolve_n_init(self, k, schedule):
        """n_init as an int: "auto" is 1 for k-means++, k-means|| or an array, 10 for "random" or a
        callable (scikit-learn's rule), and 1 when annealing (which does not use init).
        Also issues scikit-learn's warning for algorithm="elkan" with one cluster (both
        algorithms run Lloyd here)."""
        if self.algorithm == "elkan" and k == 1:
            warnings.warn(
                "algorithm='elkan' doesn't make sense for a single cluster. Using 'lloyd' instead.",
                RuntimeWarning,
                stacklevel=4,
            )
        if self.n_init != "auto":
            return int(self.n_init)
        if schedule is not None:
            return 1
        if isinstance(self.init, str):
            return 1 if self.init in ("k-means++", "k-means||") else AUTO_N_INIT_RANDOM
        return AUTO_N_INIT_RANDOM if callable(self.init) else 1


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


DEFAULTS = FitParams()


def runs_of(init, n_init):
    """n_init, or 1 with scikit-learn's warning where init is an array of centroids."""
    if not isinstance(init, str) and not callable(init) and n_init != 1:
        warnings.warn(
            "Explicit initial center position passed: performing only one init "
            f"in SoftKMeans instead of n_init={n_init}.",
            RuntimeWarning,
            stacklevel=4,
        )
        return 1
    return n_init


def width_of(kind, sigma, critical_sigma):
    """The sigma a fit runs at: 0 for "hard", the given one, or the default fraction of
    the critical width (1.0 when every point is the same, where any width will do)."""
    if kind == "hard":
        return 0.0
    if sigma is not None:
        return float(sigma)
    sigma = DEFAULT_SIGMA_FRACTION * critical_sigma
    return sigma if sigma > 0 else 1.0


def tolerance_of(variances, tol):
    """tol x the mean (weighted) feature variance (scikit-learn's `_tolerance`).

    NOTE: scikit-learn ignores sample weights here; we weight the variance so that
    integer weights and duplicated rows give the same tolerance (with unit weights the
    two agree up to rounding).
    """
    return float(np.mean(variances) * tol) if tol else 0.0
