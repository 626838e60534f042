"""critical_sigma_ of a fitted `softkmeans.SoftKMeans`, computed on first read from the
training data when the fit did not need it, and never from data changed since the fit
(issue 36: a silently wrong value was read from a changed array)."""

from __future__ import annotations

import weakref

from . import sources
from .fit.driver import threads_for
from .sources import reads

__all__ = ["CriticalSigma", "Fingerprint", "weak_ref"]


def weak_ref(X):
    """A weak reference to X, or None where X takes none (a list, say)."""
    try:
        return weakref.ref(X)
    except TypeError:
        return None


class CriticalSigma:
    """critical_sigma_, computed on first read from the training data when the fit did
    not need it: the data held by a weak reference (the fitted model does not keep the
    training data alive; None: computed now from the source), the weights as validated."""

    def __init__(self, value, training_data, source, metric, fingerprint=None):
        self._value = value
        self._X = training_data
        self._weights = None
        self._metric = metric
        self._fingerprint = fingerprint
        if value is None:
            if training_data is None or fingerprint is None:
                self._value = metric.critical_sigma(metric.source(source))
                self._X = None
            elif not source.unit_weights:
                self._weights = source.weights

    def value(self):
        if self._value is None:
            X = self._X() if self._X is not None else None
            if X is None:
                raise AttributeError(
                    "critical_sigma_ is computed on first read from the training data, which "
                    "is no longer referenced; use softkmeans.critical_sigma(X, sample_weight=...)"
                )
            source = self._metric.source(sources.source_of(X, self._weights))
            if not self._fingerprint.matches(source):
                raise AttributeError(
                    "critical_sigma_ is computed on first read from the training data, which "
                    "has changed since fit (its objective at the fitted centroids differs); "
                    "use softkmeans.critical_sigma(X, sample_weight=...) on the data you mean"
                )
            self._value = self._metric.critical_sigma(source)
            self._X = self._weights = self._fingerprint = None
        return self._value


class Fingerprint:
    """The fitted objective and how to recompute it: the same source kind of pass as the
    fit's final one, at the fitted centroids. The sums over rows may run in another order
    (the bounded pass's), so equality is up to float64 rounding of a sum (1e-9 relative);
    a change of the data that keeps the objective there to that precision is not seen."""

    RTOL = 1e-9

    def __init__(self, C, kind, sigma, objective, n_threads):
        self.C, self.kind, self.sigma = C, kind, sigma
        self.objective, self.n_threads = objective, n_threads

    def matches(self, source):
        k, d = self.C.shape
        if source.shape[1] != d:
            return False
        source.n_threads = threads_for(self.n_threads, source.rows_per_pass, k, d)
        C = self.C.astype(source.dtype, copy=False)
        got = float(reads.stats(source, C, self.kind, self.sigma, sums=False)[0].objective)
        return abs(got - self.objective) <= self.RTOL * max(abs(got), abs(self.objective))
