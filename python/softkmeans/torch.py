"""softkmeans for PyTorch: the free energy as a differentiable loss, its closed-form
centroid step, and vector quantization that keeps its codebook in use.

Conventions are SPEC.md's: sigma is the RBF width, the temperature is T = 2 sigma^2 and
the scores are z_ij = -D_ij / (2 sigma^2) with D_ij = ||x_i - c_j||^2. ``kind`` is
``"hard"`` (the K-Means distortion J), ``"softmax"`` (the free energy F_sigma) or
``"entmax15"`` (the Tsallis objective G_sigma); all three are called "the objective" or
"F" below.

Two paths compute the same numbers:

- CPU float32/float64 tensors go to the native core: the forward is one fused
  `block_stats` pass (objective, N, S and, when ``x`` needs a gradient, dF/dx) that never
  holds an (n, k) matrix; the tensors are read through NumPy views (no copy when they
  are contiguous). The backward only scales what the forward computed.
- Every other device and dtype runs in plain torch with the same math (the
  log-sum-exp shifted by the row maximum; entmax15 by SPEC.md's sort over the
  candidates z_j > max z - 2). float16 and bfloat16 are computed in float32 and the
  objective is returned in float32, as autocast users expect.

Gradients are SPEC.md's (envelope theorem: r is held at its optimum),
dF/dc_j = 2 (N_j c_j - S_j) and dF/dx_i = 2 w_i (x_i - sum_j r_ij c_j), for every kind.
As sigma -> 0 the data gradient tends to the K-Means gradient 2 w_i (x_i - c_a(i)); it
does not vanish. Sample weights are constants (no gradient flows to them).

Cosine (spherical) K-Means (SPEC.md, "Cosine (spherical) K-Means"): call these functions
on ``torch.nn.functional.normalize(x, dim=1)`` and the normalized centroids. On unit rows
and unit centroids D_ij = 2 - 2 x_i.c_j, so `free_energy` is the cosine objective
(softmax: the von Mises-Fisher mixture of concentration 1 / sigma^2, `responsibilities`
its posterior) and autograd carries SPEC.md's gradients through the normalization (their
tangent part); the cosine centroid step is ``normalize(closed_form_update(xn, cn)[0])``
(S_j / N_j has the direction of S_j); ``critical_sigma(x, metric="cosine")`` the
spherical critical width. A zero row of x normalizes to 0: give it weight 0, as
``SoftKMeans(metric="cosine")`` does.

A sigma tensor that requires grad gets dF/dsigma; a double backward raises
(`softkmeans._torch_sigma`). Only these two modules import torch; ``import softkmeans``
does not.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
import torch

from . import _native, _stats, _torch_sigma
from . import _validation as v
from ._covariance import Covariance
from .fit.metric import EUCLIDEAN, metric_of

__all__ = ["SoftKMeansLoss", "VQOutput", "VectorQuantizer", "closed_form_update",
           "critical_sigma", "free_energy", "responsibilities"]  # fmt: skip

_NATIVE_DTYPES = (torch.float32, torch.float64)
REDUCTIONS = ("sum", "mean")


# ----------------------------------------------------------------------------- validation
# The messages are those of softkmeans._validation, so the torch and NumPy APIs refuse the
# same inputs with the same words.


def _compute_dtype(dtype):
    """float32/float64 stay; float16 and bfloat16 are computed in float32."""
    return dtype if dtype in _NATIVE_DTYPES else torch.float32


def _check_tensor(t, name, ndim):
    """A floating-point tensor of `ndim` dimensions, not empty, finite, of safe magnitude."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(
            f"{name} must be a real floating-point tensor (float32 or float64; float16 and "
            f"bfloat16 are computed in float32); got dtype {t.dtype}"
        )
    if t.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional; got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise ValueError(f"{name} must not be empty; got shape {tuple(t.shape)}")
    # One min and one max reduction (NaN propagates through both), as in _validation; on
    # NumPy views for CPU tensors (single-threaded, no thread pool to wake for a check).
    if t.device.type == "cpu" and t.dtype != torch.bfloat16:
        a = t.detach().numpy()
        lo, hi = float(a.min()), float(a.max())
    else:
        lo, hi = (float(a) for a in torch.aminmax(t.detach()))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{name} contains NaN or infinity")
    np_dtype = np.float64 if t.dtype == torch.float64 else np.float32
    limit = v.magnitude_limit(np.dtype(np_dtype), t.shape[-1])
    big = max(hi, -lo)
    if big > limit:
        raise ValueError(
            f"{name} has values up to {big:.3g} in magnitude; squared distances would overflow "
            f"{np.dtype(np_dtype)} (limit {limit:.3g} for d={t.shape[-1]}); rescale the data"
            + (" or use float64" if np_dtype == np.float32 else "")
        )
    return t


def _check_pair(x, centroids):
    _check_tensor(x, "x", 2)
    _check_tensor(centroids, "centroids", 2)
    if centroids.shape[1] != x.shape[1]:
        raise ValueError(
            f"centroids has {centroids.shape[1]} features but x has {x.shape[1]}; they must match"
        )
    if centroids.device != x.device:
        raise ValueError(f"centroids are on {centroids.device} but x is on {x.device}")
    # As in the NumPy API, the centroids take the dtype of the data (a differentiable cast).
    return x, centroids.to(x.dtype)


def _check_sigma(sigma, kind):
    if isinstance(sigma, torch.Tensor):
        if sigma.numel() != 1:
            raise ValueError(f"sigma must be a scalar; got shape {tuple(sigma.shape)}")
        sigma = sigma.detach().cpu().item()
    return v.check_sigma(sigma, v.check_kind(kind))


def _check_weights(sample_weight, n):
    """float64 NumPy weights (n,) checked as the NumPy API checks them."""
    if isinstance(sample_weight, torch.Tensor):
        sample_weight = sample_weight.detach().cpu().numpy()
    return v.check_sample_weight(sample_weight, n)


def _check_reduction(reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}; got {reduction!r}")
    return reduction


def _uses_native(x):
    return x.device.type == "cpu" and x.dtype in _NATIVE_DTYPES


def _numpy_view(t):
    """A NumPy array sharing t's memory (a copy only when t is not C-contiguous)."""
    return t.detach().contiguous().numpy()


# ----------------------------------------------------------------------- the torch path


def _sq_distances(x, c):
    """D (n, k) = ||x||^2 + ||c||^2 - 2 x.c, clamped at 0, differentiable.

    Both are shifted by the mean of the centroids first (D is translation invariant), so
    the expansion does not cancel for data far from the origin.
    """
    shift = c.detach().mean(dim=0)
    xs, cs = x - shift, c - shift
    D = (xs * xs).sum(1, keepdim=True) + (cs * cs).sum(1) - 2.0 * (xs @ cs.T)
    return D.clamp_min(0.0)


def _shifted_scores(D, sigma):
    """z_ij - max_l z_il = -(D_ij - min_l D_il) / (2 sigma^2) <= 0.

    The gap is formed before the division (the scores keep the accuracy of the distance
    gaps); a quotient that overflows is clamped to the dtype's most negative finite value
    (exp and entmax15 give such an entry exactly 0 either way). No special case for a gap
    of exactly 0: an entry tied with the minimum keeps its gradient (a `where` that set it
    to 0 dropped the gradient of an exactly tied non-argmin score, found by the reproduce
    oracle's experiment 9 on digits).
    """
    T = 2.0 * sigma * sigma
    gap = D - D.min(dim=1, keepdim=True).values
    return (-gap / T).clamp_min(torch.finfo(D.dtype).min)


def _entmax15_rows(z):
    """Row-wise entmax15 of scores z by SPEC.md's sort, differentiable almost everywhere.

    u = z/2 - max(z)/2 <= 0; entries u_j <= -1 are never in the support (the top entry
    alone reaches mass 1 at tau = -1), so they are clamped to -1 before the sort: the
    running means M_s, Q_s then only see values in [-1, 0] and stay well conditioned.
    tau = tau_s for the largest s with tau_s <= u_(s); r_j = [u_j - tau]_+^2.
    """
    half = z / 2.0
    u = (half - half.max(dim=1, keepdim=True).values).clamp_min(-1.0)
    u_sorted = torch.sort(u, dim=1, descending=True).values
    s = torch.arange(1, u.shape[1] + 1, device=u.device, dtype=u.dtype)
    M = u_sorted.cumsum(1) / s
    Q = (u_sorted * u_sorted).cumsum(1) / s
    delta = ((1.0 - s * (Q - M * M)) / s).clamp_min(0.0)
    tau_s = M - delta.sqrt()
    qualifies = tau_s <= u_sorted
    support = (qualifies * s).argmax(dim=1, keepdim=True)  # index of the largest such s
    tau = tau_s.gather(1, support)
    return (u - tau).clamp_min(0.0) ** 2


def _assignment(D, sigma, kind):
    """Responsibilities r (n, k) from distances D (no gradient through D's argmin/sort)."""
    if kind == "hard":
        r = torch.zeros_like(D)
        return r.scatter_(1, D.argmin(dim=1, keepdim=True), 1.0)  # ties to the smallest j
    z = _shifted_scores(D, sigma)
    if kind == "softmax":
        r = torch.softmax(z, dim=1)
        # SPEC.md: a softmax responsibility below the smallest normal number is 0.
        return torch.where(r < torch.finfo(r.dtype).tiny, torch.zeros_like(r), r)
    return _entmax15_rows(z)


def _point_objectives(D, r, sigma, kind):
    """Per-point objective terms (before weighting), as in the reference."""
    d_min = D.min(dim=1).values
    if kind == "hard":
        return d_min
    T = 2.0 * sigma * sigma
    if kind == "softmax":
        return d_min - T * torch.exp(_shifted_scores(D, sigma)).sum(1).log()
    expected = d_min + (r * (D - d_min[:, None])).sum(1)
    tsallis = (4.0 / 3.0) * (1.0 - (r * r.sqrt()).sum(1))
    return expected - T * tsallis


def _torch_free_energy(x, c, sigma, kind, w):
    """The objective in plain torch, with SPEC.md's (envelope) gradient.

    The value is computed without a graph; the gradient is attached as
    sum_ij w_i r_ij (D_ij - D_ij.detach()) (zero in value): its derivative is
    sum_j w_i r_ij dD_ij, i.e. 2 w_i (x_i - sum_j r_ij c_j) and 2 (N_j c_j - S_j), with r
    held fixed and no division by the temperature.
    """
    dtype = _compute_dtype(x.dtype)
    x, c = x.to(dtype), c.to(dtype)
    w = torch.as_tensor(w, dtype=dtype, device=x.device)
    D = _sq_distances(x, c)
    with torch.no_grad():
        r = _assignment(D, sigma, kind)
        value = (w * _point_objectives(D, r, sigma, kind)).sum()
    if not (x.requires_grad or c.requires_grad):
        return value
    return value + (w[:, None] * r * (D - D.detach())).sum()


# ---------------------------------------------------------------------- the native path


class _NativeFreeEnergy(torch.autograd.Function):
    """One fused native pass in the forward; the backward scales the saved gradients."""

    @staticmethod
    def forward(ctx, x, c, kind, sigma, w, n_threads):
        X, C = _numpy_view(x), _numpy_view(c)
        want_x, want_c = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        stats, _, grad_X = _native.block_stats(
            X, C, kind, sigma, w, n_threads, sums=want_c, grad_x=want_x
        )
        ctx.grad_x = torch.from_numpy(grad_X) if want_x else None
        ctx.grad_c = torch.from_numpy(_stats.centroid_gradient(stats, C)) if want_c else None
        return torch.tensor(stats.objective, dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        gx = None if ctx.grad_x is None else grad_output * ctx.grad_x
        gc = None if ctx.grad_c is None else grad_output * ctx.grad_c
        return gx, gc, None, None, None, None


# ------------------------------------------------------------------------- public API


def free_energy(
    x, centroids, sigma=None, kind="softmax", sample_weight=None, reduction="sum", n_threads=None
):
    """The kind's objective of x (n, d) at centroids (k, d): a scalar tensor.

    hard: J = sum_i w_i min_j D_ij; softmax: F_sigma = sum_i w_i (-2 sigma^2 lse_i);
    entmax15: G_sigma (SPEC.md). sigma is the RBF width (T = 2 sigma^2; ignored for
    "hard"). reduction "sum" returns the weighted sum; "mean" divides it by the total
    weight W = sum_i w_i (n without weights). Differentiable with respect to x and
    centroids (SPEC.md's gradients) and in a sigma tensor that requires grad; sample_weight
    is a constant; no double backward (`softkmeans._torch_sigma`). n_threads: the native
    path's OpenMP threads.
    """
    x, centroids = _check_pair(x, centroids)
    kind = v.check_kind(kind)
    sigma_in, sigma = sigma, _check_sigma(sigma, kind)  # sigma_in: a tensor may want grad
    w = _check_weights(sample_weight, x.shape[0])
    reduction = _check_reduction(reduction)
    n_threads = v.check_n_threads(n_threads)
    if _uses_native(x):
        out = _NativeFreeEnergy.apply(x, centroids, kind, sigma, w, n_threads)
    else:
        out = _torch_free_energy(x, centroids, sigma, kind, w)
    r = lambda: responsibilities(x.detach(), centroids.detach(), sigma, kind)  # noqa: E731
    out = _torch_sigma.with_sigma_gradient(out, sigma_in, sigma, kind, w, r)
    return out / float(w.sum()) if reduction == "mean" else out


def responsibilities(x, centroids, sigma=None, kind="softmax"):
    """r (n, k) of each point for each centroid, differentiable for softmax and entmax15.

    The dtype is x's (float16/bfloat16 inputs give float32). "hard" gives one-hot rows
    with ties to the smallest index (no gradient).
    """
    x, centroids = _check_pair(x, centroids)
    kind = v.check_kind(kind)
    sigma = _check_sigma(sigma, kind)
    dtype = _compute_dtype(x.dtype)
    D = _sq_distances(x.to(dtype), centroids.to(dtype))
    if kind == "hard":
        return _assignment(D.detach(), sigma, kind)
    return _assignment(D, sigma, kind)


def _batch_sums(x, c, sigma, kind, w, n_threads=0):
    """(N (k,), S (k, d)) float64 tensors on x's device: one native pass on CPU."""
    if _uses_native(x):
        stats, _, _ = _native.block_stats(_numpy_view(x), _numpy_view(c), kind, sigma, w, n_threads)
        return torch.from_numpy(stats.cluster_weights), torch.from_numpy(stats.sums)
    dtype = _compute_dtype(x.dtype)
    xd, cd = x.detach().to(dtype), c.detach().to(dtype)
    wr = torch.as_tensor(w, dtype=dtype, device=x.device)[:, None] * _assignment(
        _sq_distances(xd, cd), sigma, kind
    )
    return wr.sum(0).double(), (wr.T @ xd).double()


def _all_reduced(all_reduce, N, S):
    """N and S summed over ranks by one call of all_reduce on a flat float64 buffer.

    all_reduce follows torch.distributed.all_reduce: it sums its tensor in place (a
    returned tensor, if any, is used instead), so ``torch.distributed.all_reduce`` itself
    can be passed.
    """
    k = N.shape[0]
    buf = torch.cat([N.reshape(-1), S.reshape(-1)])
    out = all_reduce(buf)
    if isinstance(out, torch.Tensor):
        buf = out
    return buf[:k], buf[k:].reshape(S.shape)


@torch.no_grad()
def closed_form_update(
    x,
    centroids,
    sigma=None,
    kind="softmax",
    momentum=None,
    *,
    counts=None,
    sample_weight=None,
    all_reduce: Callable | None = None,
    n_threads=None,
):
    """The centroid step from a batch: `(new centroids, new counts)`; no learning rate.

    Default (momentum None): SPEC.md's running-mean rule. counts holds the running totals
    N_j(t-1) (None: zeros, i.e. the batch's own step S_j / N_j); N_j(t) = N_j(t-1) +
    N_j(batch) and c_j <- c_j + (S_j(batch) - N_j(batch) c_j) / N_j(t).
    With momentum m in [0, 1): an exponential moving average for drifting data,
    c_j <- m c_j + (1 - m) S_j / N_j and counts <- m counts + (1 - m) N_j.
    Either way clusters the batch does not touch (N_j = 0) stay where they are.
    all_reduce: sums the batch statistics (N, S) over data-parallel ranks before the
    update (e.g. ``torch.distributed.all_reduce``), so every rank gets the same codebook.
    Returns new tensors in the dtype and on the device of centroids; counts float64.
    """
    x, c = _check_pair(x, centroids)
    kind = v.check_kind(kind)
    sigma = _check_sigma(sigma, kind)
    w = _check_weights(sample_weight, x.shape[0])
    if momentum is not None:
        momentum = v.check_real(momentum, "momentum", minimum=0.0)
        if momentum >= 1.0:
            raise ValueError(f"momentum must be in [0, 1); got {momentum}")
    N, S = _batch_sums(x, c, sigma, kind, w, v.check_n_threads(n_threads))
    N, S = N.to(x.device), S.to(x.device)
    if all_reduce is not None:
        N, S = _all_reduced(all_reduce, N, S)
    k = c.shape[0]
    totals = (
        torch.zeros(k, dtype=torch.float64, device=x.device)
        if counts is None
        else torch.as_tensor(counts, dtype=torch.float64, device=x.device)
    )
    C64 = c.detach().double()
    touched = N > 0
    if momentum is None:
        new_totals = totals + N
        step = (S - N[:, None] * C64) / new_totals.clamp_min(1e-300)[:, None]
    else:
        new_totals = momentum * totals + (1.0 - momentum) * N
        step = (1.0 - momentum) * (S / N.clamp_min(1e-300)[:, None] - C64)
    new_C = torch.where(touched[:, None], C64 + step, C64)
    return new_C.to(centroids.dtype), new_totals


def critical_sigma(x, sample_weight=None, metric="euclidean"):
    """sqrt(lambda_max) of the weighted population covariance of x (a Python float).

    For sigma above it, all centroids at the weighted mean is a strict local minimizer of
    F_sigma (SPEC.md, "Critical temperature"): a temperature schedule keeps sigma below.
    metric="cosine": the spherical width sqrt(lambda_max(P Sigma P) / ||mu||) of the
    normalized rows (zero rows at weight 0; `softkmeans.fit.metric`).
    """
    _check_tensor(x, "x", 2)
    w = _check_weights(sample_weight, x.shape[0])
    metric = metric_of(metric)
    if metric is not EUCLIDEAN:
        x = torch.nn.functional.normalize(x.detach().double(), dim=1)
        w = w * x.any(dim=1).cpu().numpy()
    if _uses_native(x):
        cov = Covariance.of(_numpy_view(x), w)  # no (d, d) array for wide x
        return float(np.sqrt(metric.critical_lambda(cov.mean, cov)))
    xd = x.detach().double()
    wt = torch.as_tensor(w, dtype=torch.float64, device=x.device)
    mu = (wt[:, None] * xd).sum(0) / wt.sum()
    xc = xd - mu
    cov = (wt[:, None] * xc).T @ xc / wt.sum()
    return float(np.sqrt(metric.critical_lambda(mu.cpu().numpy(), cov.cpu().numpy())))


class SoftKMeansLoss(torch.nn.Module):
    """The K-Means term of a network's loss, holding its codebook.

    ``loss(x)`` is ``free_energy(x, self.centroids, self.sigma, self.kind, ...)``
    (reduction "mean" by default: per unit weight). The codebook is a parameter (train it
    by gradient) or is moved by ``closed_form_step(x)`` (SPEC.md's running mean, no
    learning rate). ``critical_sigma`` is that of the last batch seen (computed when
    read), for temperature schedules: keep sigma below it to avoid the collapse of all
    centroids to the batch mean. ``sigma`` may be changed between batches.
    """

    def __init__(self, n_clusters, dim, sigma=None, kind="softmax", *, reduction="mean", init=None):
        super().__init__()
        n_clusters = v.check_int(n_clusters, "n_clusters")
        dim = v.check_int(dim, "dim")
        self.kind = v.check_kind(kind)
        self.sigma = sigma if self.kind == "hard" else _check_sigma(sigma, self.kind)
        self.reduction = _check_reduction(reduction)
        if init is None:
            init = torch.randn(n_clusters, dim)
        elif tuple(init.shape) != (n_clusters, dim):
            raise ValueError(f"init must have shape {(n_clusters, dim)}; got {tuple(init.shape)}")
        self.centroids = torch.nn.Parameter(init.detach().clone())
        self.register_buffer("counts", torch.zeros(n_clusters, dtype=torch.float64))
        self._last = None

    def forward(self, x, sample_weight=None):
        self._last = (x.detach(), sample_weight)
        return free_energy(
            x, self.centroids, self.sigma, self.kind, sample_weight, reduction=self.reduction
        )

    @property
    def critical_sigma(self):
        """sqrt(lambda_max) of the last batch passed to forward (None before the first)."""
        if self._last is None:
            return None
        return critical_sigma(*self._last)

    def closed_form_step(self, x, momentum=None, sample_weight=None, all_reduce=None):
        """Move the codebook by the closed-form step on batch x (no gradient)."""
        new_C, self.counts = closed_form_update(
            x,
            self.centroids,
            self.sigma,
            self.kind,
            momentum,
            counts=self.counts,
            sample_weight=sample_weight,
            all_reduce=all_reduce,
        )
        with torch.no_grad():
            self.centroids.copy_(new_C)


class VQOutput(NamedTuple):
    """What VectorQuantizer returns.

    quantized:  x's shape; hard: the nearest code with a straight-through gradient to x;
                softmax/entmax15: sum_j r_ij c_j (responsibility-weighted, differentiable).
    codes:      int64, x's shape without the last axis: the nearest code of each vector.
    loss:       the quantizer's loss (see VectorQuantizer).
    perplexity: exp of the entropy of the batch's code histogram (k when uniform).
    usage:      the fraction of codes nearest to at least one vector of the batch.
    """

    quantized: torch.Tensor
    codes: torch.Tensor
    loss: torch.Tensor
    perplexity: float
    usage: float


class VectorQuantizer(torch.nn.Module):
    """Vector quantization with a hard, softmax or entmax15 codebook assignment.

    Inputs (..., dim); the last axis is the vector. update="closed_form": in training
    mode each forward moves the codebook by `closed_form_update` (running mean with
    momentum None, EMA otherwise; no learning rate, no gradient to the codebook) and the
    loss is ``commitment`` times the mean objective with the codebook held fixed (its
    gradient pulls x toward its codes). update="gradient": the codebook is a trained
    parameter and the loss is the mean objective (codebook term) plus ``commitment`` times
    the same with the codebook detached. The objective is the kind's (J for hard: the
    usual VQ-VAE codebook and commitment losses; F_sigma / G_sigma for soft kinds).
    Soft assignments give every code in reach of a vector some mass, so codes that start
    far from the data still move: fewer dead codes than hard VQ.
    all_reduce: a function summing a tensor in place over data-parallel ranks (e.g.
    ``torch.distributed.all_reduce``); the closed-form statistics go through it, so every
    rank computes the same codebook.
    """

    def __init__(
        self,
        n_codes,
        dim,
        sigma=None,
        kind="hard",
        update="closed_form",
        *,
        momentum=None,
        commitment=0.25,
        init=None,
        all_reduce: Callable | None = None,
    ):
        super().__init__()
        n_codes, dim = v.check_int(n_codes, "n_codes"), v.check_int(dim, "dim")
        self.kind = v.check_kind(kind)
        sigma = _check_sigma(sigma, self.kind if sigma is None else "softmax")  # as SoftKMeans
        self.sigma = None if self.kind == "hard" else sigma
        if update not in ("closed_form", "gradient"):
            raise ValueError(f"update must be 'closed_form' or 'gradient'; got {update!r}")
        self.update = update
        self.momentum = momentum
        self.commitment = v.check_real(commitment, "commitment", minimum=0.0)
        self.all_reduce = all_reduce
        if init is None:
            init = torch.randn(n_codes, dim)
        elif tuple(init.shape) != (n_codes, dim):
            raise ValueError(f"init must have shape {(n_codes, dim)}; got {tuple(init.shape)}")
        self.codebook = torch.nn.Parameter(
            init.detach().clone(), requires_grad=update == "gradient"
        )
        self.register_buffer("counts", torch.zeros(n_codes, dtype=torch.float64))

    def forward(self, x):
        if not isinstance(x, torch.Tensor) or x.ndim < 1 or x.shape[-1] != self.codebook.shape[1]:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must have a last axis of {self.codebook.shape[1]}; got {shape}")
        flat = x.reshape(-1, x.shape[-1])
        codebook = self.codebook
        C = codebook.detach() if self.update == "closed_form" else codebook
        loss = self.commitment * free_energy(
            flat, C.detach(), self.sigma, self.kind, reduction="mean"
        )
        if self.update == "gradient":
            loss = loss + free_energy(flat.detach(), C, self.sigma, self.kind, reduction="mean")
        dtype = _compute_dtype(flat.dtype)
        D = _sq_distances(flat.to(dtype), C.to(dtype))
        codes = D.detach().argmin(dim=1)
        if self.kind == "hard":
            q = C.to(dtype)[codes]
            quantized = flat + (q - flat).detach()  # straight-through
        else:
            quantized = _assignment(D, self.sigma, self.kind) @ C.to(dtype)
        hist = torch.bincount(codes, minlength=C.shape[0]).double()
        p = hist / hist.sum()
        perplexity = float(torch.exp(-(p[p > 0] * p[p > 0].log()).sum()))
        usage = float((hist > 0).double().mean())
        if self.training and self.update == "closed_form":
            new_C, self.counts = closed_form_update(
                flat.detach(),
                codebook,
                self.sigma,
                self.kind,
                self.momentum,
                counts=self.counts,
                all_reduce=self.all_reduce,
            )
            with torch.no_grad():
                codebook.copy_(new_C)
        out_shape = x.shape[:-1]
        return VQOutput(
            quantized.reshape(*out_shape, -1).to(x.dtype)
            if x.dtype in _NATIVE_DTYPES
            else quantized.reshape(*out_shape, -1),
            codes.reshape(out_shape),
            loss,
            perplexity,
            usage,
        )
