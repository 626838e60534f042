"""sigma="auto": the width re-estimated as the fit goes, by EM (SPEC.md, "A temperature
that means something").

The model is the equal-weight isotropic Gaussian mixture, x ~ (1/k) sum_j N(c_j, sigma^2 I).
Its EM step from (C, sigma) is the softmax step at sigma (the E-step's posterior r_ij is
the softmax responsibility, SPEC.md's map 2) followed by the maximum-likelihood variance
at the new centroids c_j+ = S_j / N_j:

    sigma+^2 = sum_ij w_i r_ij ||x_i - c_j+||^2 / (W d)
             = (W tr(Sigma) - sum_j N_j ||c_j+ - mu||^2) / (W d),

the within-cluster scatter as the total scatter minus the between-cluster one (mu =
sum_j S_j / W, tr(Sigma) the sum of the weighted feature variances the fit already has for
its tolerance). So each EM step is one fused softmax pass, as a fixed-sigma step is, and at
its fixed point `predict_proba` is the mixture's posterior.

NOTE: the difference cancels where the clusters are tight against the data's spread: the
variance keeps about -log10(eps_64 x tr(Sigma) / within) digits (10 or more for a within
scatter above 1e-6 of the total). The start, sigma_0^2 = J(C_0) / (W d), is the same
estimate with hard responsibilities (one hard pass).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _stats
from ..sources import queries, reads
from .params import AUTO, is_auto
from .steps import History, run_steps
from .tasks import NO_TASKS

__all__ = ["AUTO", "EM_GAIN_TOL_PER_TOL", "is_auto", "ml_sigma", "nll_score", "run_em"]

# EM's likelihood test (run_em's gain_tol) is this times the fit's tol: GaussianMixture's
# tol = 1e-3 at the default tol = 1e-4; tol = 0 runs to the fixed point as before.
EM_GAIN_TOL_PER_TOL = 10.0


def ml_sigma(stats, total_scatter, d):
    """sqrt of the ML variance at the centroids S_j / N_j of a step's statistics.

    total_scatter: W tr(Sigma) = sum_i w_i ||x_i - mu||^2.
    """
    W = float(stats.weight)
    N = np.asarray(stats.cluster_weights, dtype=np.float64)
    S = np.asarray(stats.sums, dtype=np.float64)
    mu = S.sum(axis=0) / W
    full = N > 0
    means = S[full] / N[full, None]
    between = float((N[full] * ((means - mu) ** 2).sum(axis=1)).sum())
    within = total_scatter - between
    floor = 1e-300 if total_scatter <= 0 else 1e-12 * total_scatter
    return math.sqrt(max(within, floor) / (W * d)) if total_scatter > 0 else 1.0


def nll_score(stats, sigma, d):
    """Minus the mixture's log-likelihood at (C, sigma) up to constants, from the softmax
    objective F = -2 sigma^2 sum_i w_i lse_i: F / (2 sigma^2) + W d log sigma (what n_init
    runs compare: each ends at its own sigma, so their F are not comparable)."""
    W = float(stats.weight)
    return float(stats.objective) / (2.0 * sigma * sigma) + W * d * math.log(sigma)


def run_em(source, C, *, tol, max_iter, relocate, on_step=None, task=NO_TASKS, gain_tol=0.0,
           history=None):  # fmt: skip
    """EM from C (k, d): returns (centroids, sigma, History, final (BlockStats, labels)).
    history: a first stage's (Lloyd's), which EM's steps continue (None: a new one).

    Each step is the softmax step at the current sigma; sigma is then re-estimated from
    that step's statistics. Stops as a fixed-sigma fit does (total squared shift <= tol),
    or, with gain_tol > 0, as GaussianMixture does: once a step gains at most gain_tol
    in the mean log-likelihood per unit of weight (its tol: 1e-3 by default).
    Why both: EM's centroids creep where the components overlap (on TF-IDF rows, 200
    steps of shifts above tol, each gaining 1e-3 to 1e-1 nats a row), which the
    likelihood, the model's own measure, already counts as converged.
    """
    d = source.shape[1]
    hard, _ = reads.stats(source, C, "hard", 0.0, sums=False)
    W = float(hard.weight)
    total_scatter = float(queries.feature_variances(source).sum()) * W
    sigma = math.sqrt(max(float(hard.distortion), 0.0) / (W * d)) or 1.0
    scores = []  # each step's nll_score per unit of weight, at the C and sigma it started

    def em_step(C):
        nonlocal sigma
        stats, _ = reads.stats(source, C, "softmax", sigma)
        used = sigma
        scores.append(nll_score(stats, used, d) / W)
        sigma = ml_sigma(stats, total_scatter, d)
        return _stats.step_result(stats, C), used, "softmax"

    def small_gain():
        return gain_tol > 0 and len(scores) >= 2 and scores[-2] - scores[-1] <= gain_tol

    history = History() if history is None else history
    C, _, _ = run_steps(
        C, em_step, max_steps=max_iter, tol=tol, history=history, relocate=relocate,
        on_step=on_step, task=task, converged=small_gain, first=history.n_iter,
    )  # fmt: skip
    final = reads.stats(source, C, "softmax", sigma, sums=False, labels=True)
    return C, sigma, history, final
