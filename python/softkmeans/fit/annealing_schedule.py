"""Deterministic annealing (Rose, Gurewitz & Fox 1990; Rose 1998) on the softkmeans engine.

Temperature convention (as everywhere in softkmeans): we speak of the RBF width sigma; the
temperature is T = 2 sigma^2 and the scores are z_ij = -D_ij / (2 sigma^2).

This is *mass-constrained* DA: each distinct centroid j carries a mass p_j (its share of
the weight) and the responsibilities are r_ij ~ p_j exp(-D_ij / (2 sigma^2)), so a
centroid's pull does not depend on how many copies of it exist. The engine's kernels have
no per-centroid prior, so the masses enter through one extra coordinate: x'_i = (x_i, 0),
c'_j = (c_j, b_j) with b_j^2 = 2 sigma^2 log(p_max / p_j), which gives
D'_ij = D_ij - 2 sigma^2 log p_j + const and hence exactly those responsibilities from the
native ``centroid_step``.

The driver

1. starts with one centroid at the weighted mean mu (mass 1), at ``start`` (default
   1.2 x critical_sigma, above the critical width sqrt(lambda_max) where the mean is a
   strict local minimizer, SPEC.md "Critical temperature");
2. cools geometrically, sigma <- ``cooling`` x sigma, down to ``stop`` (default
   0.05 x critical_sigma). At each width, while there are fewer than k centroids, each
   centroid j whose own critical width has been crossed -- sigma^2 < lambda_max of its
   posterior covariance sum_i w_i r_ij (x_i - c_j)(x_i - c_j)^T / N_j, computed by
   ``softkmeans.critical_sigma(X, sample_weight=w * r_j)`` -- is split into two copies
   perturbed by +-``perturbation`` x its own width in a random direction (largest
   critical widths first, at most ``splits`` per width). Each split is a phase
   transition, recorded (sigma, iteration, count before and after). The two halves of a
   fresh split are one cluster until they are resolved, so neither may split again before
   they are apart by half the cluster's width, sqrt(lambda_max) / 2. Then centroid steps
   run until the shift is <= tol;
3. finishes exactly at Lloyd: if fewer than k centroids exist at ``stop``, the missing ones
   are placed on the points farthest from their centroid; then entmax15 steps run at
   sigma_t = min(sigma, sqrt(Delta_min(C_t)) / 4), half the exact-recovery threshold
   sqrt(Delta_min) / 2, until the centroids stop moving. Below that threshold an entmax15
   step *is* Lloyd's step, so the result is a K-Means fixed point;
4. with ``split_merge`` (the default), searches from there by split-merge moves (remove a
   centroid, split the costliest cluster along its axis, Lloyd; kept when J drops) until
   none helps, and finishes exactly again: continuation alone cannot reach a lower branch
   born at a first-order transition (`softkmeans.fit.split_merge` says where it matters).

The schedule runs in `softkmeans.fit.annealing`, reading X through the fit's data source
(`softkmeans.sources`), so one implementation serves every kind of input.
"""

from __future__ import annotations

import dataclasses
import warnings

from .. import _validation as v

__all__ = ["AnnealingSchedule", "check_conflicts", "check_schedule"]


@dataclasses.dataclass(frozen=True)
class AnnealingSchedule:
    """A deterministic-annealing schedule; widths are sigmas (T = 2 sigma^2).

    start:        initial sigma; None -> 1.2 x critical_sigma (above the first phase
                  transition, where all centroids sit at the mean).
    stop:         last annealing sigma; None -> 0.05 x critical_sigma.
    cooling:      geometric factor in (0, 1): sigma <- cooling x sigma.
    steps:        most centroid steps per width (a width ends once the shift <= tol).
    perturbation: size of the split of a centroid, relative to its own critical width.
    splits:       most centroids split per width (the largest critical widths first);
                  one at a time lets each split settle before the next is chosen.
    kind:         assignment map during annealing: "softmax" (classical DA, Shannon
                  entropy) or "entmax15".
    finish:       True: end with entmax15 below the exact-recovery threshold, i.e. Lloyd
                  (the result is a K-Means fixed point); False: stop at ``stop``.
    split_merge:  True: after the finish, split-merge moves at zero temperature while they
                  lower J (needs ``finish``); False: the annealed branch as it ends.
    """

    start: float | None = None
    stop: float | None = None
    cooling: float = 0.95
    steps: int = 100
    perturbation: float = 1e-2
    splits: int = 1
    kind: str = "softmax"
    finish: bool = True
    split_merge: bool = True

    def __post_init__(self):
        for name in ("start", "stop"):
            value = getattr(self, name)
            if value is not None:
                _positive(value, name)
        c = _real(self.cooling, "cooling")
        if not 0.0 < c < 1.0:
            raise ValueError(f"anneal cooling must be in (0, 1); got {c}")
        for name in ("steps", "splits"):
            v.check_int(getattr(self, name), f"anneal {name}", 1)
        p = _real(self.perturbation, "perturbation")
        if not 0.0 <= p < 1.0:
            raise ValueError(f"anneal perturbation must be in [0, 1); got {p}")
        if self.kind not in ("softmax", "entmax15"):
            raise ValueError(f"anneal kind must be 'softmax' or 'entmax15'; got {self.kind!r}")
        if self.start is not None and self.stop is not None and self.stop > self.start:
            raise ValueError(f"anneal stop ({self.stop}) must be <= start ({self.start})")

    def resolve(self, critical_sigma: float) -> tuple[float, float]:
        """(start, stop) in data units for data whose critical width is ``critical_sigma``."""
        scale = critical_sigma if critical_sigma > 0 else 1.0
        start = self.start if self.start is not None else 1.2 * scale
        stop = self.stop if self.stop is not None else 0.05 * scale
        return float(start), float(min(stop, start))


def _real(value, name):
    return v.check_real(value, f"anneal {name}")


def _positive(value, name):
    return v.check_real(value, f"anneal {name}", minimum=0.0, strict=True)


def check_schedule(anneal) -> AnnealingSchedule | None:
    """None/False -> None; True -> the default schedule; a dict or an AnnealingSchedule."""
    if anneal is None or anneal is False:
        return None
    if anneal is True:
        return AnnealingSchedule()
    if isinstance(anneal, AnnealingSchedule):
        return anneal
    if isinstance(anneal, dict):
        fields = {f.name for f in dataclasses.fields(AnnealingSchedule)}
        unknown = sorted(set(anneal) - fields)
        if unknown:
            raise ValueError(f"unknown anneal keys {unknown}; expected some of {sorted(fields)}")
        return AnnealingSchedule(**anneal)
    raise TypeError(
        f"anneal must be None, True, a dict or an AnnealingSchedule; got {type(anneal).__name__}"
    )


def check_conflicts(schedule: AnnealingSchedule | None, *, sigma, assignment):
    """Refuse or warn where annealing would override a parameter silently.

    sigma: annealing sets the widths itself (start, stop), so any sigma is refused.
    assignment: annealing runs with the schedule's ``kind``; an assignment other than the
    default "softmax" and that kind only sets the map of predict_proba and score at the
    last width, which is worth a warning ("hard" too: the finish is Lloyd's anyway).
    """
    if schedule is None:
        return
    if sigma is not None:
        raise ValueError(
            f"sigma={sigma!r} conflicts with anneal: annealing sets the widths itself "
            "(anneal start/stop); pass sigma=None, or anneal=None for a fixed sigma"
        )
    if assignment not in ("softmax", "hard", schedule.kind):
        warnings.warn(
            f"anneal runs with kind={schedule.kind!r}; assignment={assignment!r} only sets "
            "the map of predict_proba and score at the last width (pass anneal="
            f"{{'kind': {assignment!r}}} to anneal with it)",
            UserWarning,
            stacklevel=5,
        )
