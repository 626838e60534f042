"""The trusted native layer: the only module that imports the compiled core `_core`.

Its functions take arguments already checked by `softkmeans._validation` (X and C
C-contiguous arrays of one dtype, float32 or float64; weights float64 (n,); kind a known
kind; sigma a positive float, any value for "hard"; n_threads an int, 0 for the OpenMP
default) and call the core without checking them again. The public API (`_api`) validates
once and calls here; the fitting loops (driver, annealing, seeding, command line) call here
directly, so one fit validates its data once and reads it once per iteration.

X may also be a validated CSR matrix (`softkmeans._sparse.check_csr`: canonical, float32 or
float64, int32 or int64 indices): the calls that read the rows of X then run the core's
csr_* kernels on its stored entries.

Callers use these as ``_native.<name>(...)`` (never ``from ._native import``), so that a
test can count the passes a fit makes over X by wrapping them.
"""

from __future__ import annotations

from . import _core
from ._stats import BlockStats

__all__ = [
    "SMALL_DIM",
    "assign",
    "assign_grouped",
    "assign_projected",
    "available_simd_levels",
    "balanced_auction",
    "balanced_counts",
    "biased_hard_stats",
    "block_stats",
    "build_info",
    "csr_second_moment_matvec",
    "default_threads",
    "entmax15",
    "feature_moments",
    "hard_stats_bounded",
    "kernel_choices",
    "kmeanspp_candidate_potentials",
    "kmeanspp_update_closest",
    "margins",
    "responsibilities",
    "reset_kernel_choices",
    "row_uniforms",
    "set_kernel_choices",
    "set_simd_level",
    "selected_simd_level",
    "second_moment_matvec",
    "sq_distances",
    "take_closer",
    "weighted_covariance",
]


# Dimensions up to this take the core's direct-difference distance path.
SMALL_DIM = _core.small_dim


def _csr(X):
    """The arguments of a csr_* kernel for a CSR X, or None for a dense X."""
    if hasattr(X, "indptr"):
        return (X.data, X.indices, X.indptr, X.shape[1])
    return None


def sq_distances(X, C, n_threads):
    """D (n, k), dtype of X."""
    if (csr := _csr(X)) is not None:
        return _core.csr_sq_distances(*csr, C, n_threads)
    return _core.sq_distances(X, C, n_threads)


def assign(X, C, n_threads):
    """(labels int64 (n,), min_sq_dist (n,))."""
    if (csr := _csr(X)) is not None:
        return _core.csr_assign(*csr, C, n_threads)
    return _core.assign(X, C, n_threads)


def margins(X, C, n_threads):
    """Delta_i = D_i(2) - D_i(1), (n,) (inf when k == 1)."""
    if (csr := _csr(X)) is not None:
        return _core.csr_margins(*csr, C, n_threads)
    return _core.margins(X, C, n_threads)


def row_uniforms(seed, round_, start, stop, n_threads):
    """(stop - start,) float64 in [0, 1): the hashed uniforms of rows start..stop-1 in
    round `round_` for `seed` (both uint64), each a function of (seed, round_, row) only
    (SPEC.md, "k-means|| seeding")."""
    return _core.row_uniforms(seed, round_, start, stop, n_threads)


def take_closer(dist, labels, first, closest, nearest, n_threads):
    """In place where dist < closest (dist (n,) float32 or float64, widened): closest =
    dist and nearest = labels + first (closest float64, labels and nearest int64)."""
    _core.take_closer(dist, labels, first, closest, nearest, n_threads)


def entmax15(Z, n_threads):
    """Row-wise entmax15 of Z (n, k)."""
    return _core.entmax15(Z, n_threads)


def responsibilities(X, C, kind, sigma, n_threads):
    """r (n, k) of `kind` at width sigma."""
    if (csr := _csr(X)) is not None:
        return _core.csr_responsibilities(*csr, C, kind, sigma, n_threads)
    return _core.responsibilities(X, C, kind, sigma, n_threads)


def block_stats(X, C, kind, sigma, w, n_threads, *, sums=True, labels=False, grad_x=False):
    """One fused pass over the rows of X: `(BlockStats, labels or None, grad_X or None)`.

    sums: compute N and S (the step needs them; the objective does not). labels: also the
    argmin of every row, (n,) int64. grad_x: also dF/dx_i, (n, d) in the dtype of X.
    """
    if (csr := _csr(X)) is not None:
        out = _core.csr_block_stats(*csr, C, kind, sigma, w, n_threads, sums, labels, grad_x)
    else:
        out = _core.block_stats(X, C, kind, sigma, w, n_threads, sums, labels, grad_x)
    W, N, S, obj, J, mm, lab, gX = out
    return BlockStats(W, N, S, obj, J, mm), lab, gX


def hard_stats_bounded(X, C, C_prev, w, labels, lower, group, n_threads, *, exact=False):
    """The hard step of `block_stats` with group distance bounds, for a dense X:
    `(BlockStats, n_computed, n_distances)` (rows and distances computed, n k when all);
    group (k,) int64 assigns each centroid one of t <= 64 groups, labels (n,) int64 and
    lower (n, t) float64 carry the rows' labels and per-group bounds from one call to the
    next and are updated in place (C_prev None: the first call, every row computed).
    exact: distortion and min_margin are block_stats's bits even where rows are skipped.
    See `cpp/src/impl/bounded.hpp`."""
    W, N, S, J, mm, n_computed, n_distances = _core.hard_stats_bounded(
        X, C, C_prev, w, labels, lower, group, exact, n_threads
    )
    return BlockStats(W, N, S, J, J, mm), n_computed, n_distances


def assign_grouped(X, C, group, n_threads):
    """`assign`'s (labels (n,) int64, min_sq_dist (n,) X's dtype) bit for bit, for a dense
    X, computing only the groups of centroids (group (k,) int64 in [0, 64)) whose ball may
    hold a row's nearest; and the number of distances computed (n k when all). See
    `cpp/src/impl/group_pruned.hpp`."""
    return _core.assign_grouped(X, C, group, n_threads)


def nearest_two_grouped(X, C, group, n_threads):
    """`assign_grouped` with what each row's margin needs: (labels, min_sq_dist, second
    (n,) X's dtype, beyond (n,) float64, n_distances): second - min_sq_dist is the row's
    margin where second <= beyond, and at least beyond - min_sq_dist elsewhere (the
    groups left out). See `cpp/include/softkmeans/kernels.hpp`."""
    return _core.assign_grouped(X, C, group, n_threads, True)


def assign_projected(X, C, Q, mu, n_threads, *, margins=False):
    """`assign_grouped`'s outputs (with margins: `nearest_two_grouped`'s), bit for bit the
    plain pass's, for a dense X, computing in full only the centroids whose distance in
    the projection on Q's orthonormal columns ((d, p) float64) about mu ((d,) float64),
    with the norm of the rest, may be a row's least; n_distances counts those. See
    `cpp/src/impl/projected.hpp`."""
    return _core.assign_projected(X, C, Q, mu, n_threads, margins)


def balanced_auction(cand, cost, beyond, w, caps, prices, owner, free_at_zero, eps, max_bids):
    """One epsilon phase of the balanced forward auction on the candidate graph
    (`cpp/include/softkmeans/balanced.hpp`), keeping the rows of `owner` (-1: none)
    that may stay; free_at_zero: capacities (a cluster with room has price 0).
    Returns (status 0 settled / 1 a row needs more candidates / 2 too many bids,
    owner (n,) int64, prices (k,), that row)."""
    return _core.balanced_auction(
        cand, cost, beyond, w, caps, prices, owner, free_at_zero, eps, max_bids
    )


def balanced_counts(D, targets, g, owner, rows_per_move, band, edges_per_row, slack, max_tries):
    """The hard balanced assignment of unit-weight rows to integer counts `targets` from
    the offsets g, on their distances D (n, k) float32 or float64, moving first only the rows within
    band of a tie, each through its edges_per_row best other clusters; owner (n,) int64:
    the last owners (-1: none), kept where tied
    (`cpp/include/softkmeans/balanced.hpp`). Returns (status 0 settled / 1 no path / 2
    too many moves, owner (n,) int64, g (k,), rows moved, rows allowed to move)."""
    return _core.balanced_counts(
        D, targets, g, owner, rows_per_move, band, edges_per_row, slack, max_tries
    )


def biased_hard_stats(X, C, g, w, n_threads):
    """The hard assignment at offsets g (k,) float64, one fused pass over a dense X:
    (labels (n,) int64 = argmin_j (D_ij - g_j), gap (n,) to the second smallest and
    dist (n,) = D at the label, both X's dtype; BlockStats W, N, S, J at those labels)
    (`cpp/include/softkmeans/kernels.hpp`)."""
    labels, gap, dist, W, N, S, J = _core.biased_hard_stats(X, C, g, w, n_threads)[:7]
    return labels, gap, dist, BlockStats(W, N, S, J, J, float("nan"))


def biased_hard_stats_candidates(X, C, g, w, n_threads, m, band=float("inf")):
    """`biased_hard_stats` and each row's best biased columns, those of D_ij - g_j below
    its smallest + band (in X's dtype), at most m: (labels, gap, dist, BlockStats, cand
    (n, m) int32 ascending (ties to the smaller j; cand[:, 0] = labels; -1 past the
    last), cand_dist (n, m) their D_ij, floor (n,) a floor on every other column's
    biased value (the m-th value when m are held, else smallest + band))."""
    labels, gap, dist, W, N, S, J, cand, cand_dist, floor = _core.biased_hard_stats(
        X, C, g, w, n_threads, m, band
    )
    stats = BlockStats(W, N, S, J, J, float("nan"))
    return labels, gap, dist, stats, cand, cand_dist, floor


def newton_scratch():
    """Memory for `balanced_newton` kept between calls (one call at a time): a fit's
    solves make dozens of calls on the same rows, and fresh memory costs a page fault a
    page (`cpp/include/softkmeans/balanced.hpp`)."""
    return _core.NewtonScratch()


def balanced_newton(
    cand,
    cand_dist,
    targets,
    g,
    max_steps,
    enough=0,
    rows=None,
    n_threads=1,
    scratch=None,
    outputs=True,
):
    """Damped Newton on the balanced dual from the offsets g (k,) on the candidates (cand
    (N, m) int32, cand_dist (N, m)) of the rows `rows` (n,) int64 (None: all N) toward the
    counts targets (k,) int64: (count error among the candidates, g, labels (n,) int64, D
    there (n,) and gap (n,) float64 among the candidates at g, count evaluations); it stops
    at a count error of `enough`. Its sweeps over the rows run on n_threads in chunks of
    fixed size: the same outputs at every count (`cpp/include/softkmeans/balanced.hpp`).
    scratch: a `newton_scratch()` to reuse (None: the call's own memory); outputs=False:
    labels, D and gap not wanted (None; a sweep over every row saved)."""
    return _core.balanced_newton(
        cand, cand_dist, targets, g, max_steps, enough, rows, n_threads, scratch, outputs
    )


def biased_row_states(cand, cand_dist, g, n_threads=1):
    """Each row's best candidate (cand (n, m) int32, -1 past the last; cand_dist (n, m))
    at offsets g (k,), ties to the smaller column: (labels (n,) int64, D there (n,) and the
    second best candidate's value less the best's (n,) float64, inf with one), the values
    `balanced_newton` gives the rows it reads, on n_threads."""
    return _core.biased_row_states(cand, cand_dist, g, n_threads)


def biased_row_margins(cand, cand_dist, g, floor, bound, n_threads=1):
    """`biased_row_states` with each row's margin for its gap: the lower bound on its gap
    over every column, less its rounding, of `cpp/include/softkmeans/balanced.hpp`'s
    MarginBound (floor (n,) in cand_dist's dtype or None; bound: its six numbers
    floor_scale, floor_shift, rise, scale, shift, tiny). (labels, own, margin)."""
    return _core.biased_row_margins(cand, cand_dist, g, floor, *bound, n_threads)


def least_margin_rows(rows, keys, margin, counts):
    """mask (n,) uint8: 1 on the rows `rows` (int64) and on each group j's counts[j]
    (int64 (k,)) rows of least margin (float64 (n,); NaN as +inf), ties to the smaller
    row; a group's rows: keys == j (int64 (n,); outside [0, k): none), or, keys None,
    every row (k = 1). See `cpp/include/softkmeans/balanced.hpp`."""
    return _core.least_margin_rows(rows, keys, margin, counts)


def feature_moments(X, w, chunk_rows, n_threads):
    """Per chunk of chunk_rows rows of a dense X: (W (c,), mean (c, d), M2 (c, d),
    max_abs (c,), finite (c,) bool), the weights' sum, the features' weighted mean and
    sum of squared deviations (float64, each sum sequential over the chunk's rows), the
    largest |x| (of a finite chunk) and whether every value is finite (the validation
    pass's read)."""
    return _core.feature_moments(X, w, chunk_rows, n_threads)


def weighted_covariance(X, w, n_threads):
    """(mean (d,), weighted population covariance (d, d)), both float64, of a dense X
    (lambda_max of wide or sparse X: the operator `softkmeans._covariance.Covariance`)."""
    return _core.weighted_covariance(X, w, n_threads)


def csr_second_moment_matvec(X, w, v, n_threads):
    """X^T diag(w) X v, float64 (d,), for a CSR X (w (n,) and v (d,) float64)."""
    return _core.csr_second_moment_matvec(*_csr(X), w, v, n_threads)


def second_moment_matvec(X, w, mean, v, n_threads):
    """sum_i w_i ((x_i - mean) . v) (x_i - mean), float64 (d,), for a dense X (w (n,),
    mean (d,) or None for 0, v (d,) float64): one pass, nothing d x d."""
    return _core.second_moment_matvec(X, w, mean, v, n_threads)


def kmeanspp_candidate_potentials(X, w, closest, cand, n_threads, dist=None):
    """(L,) float64: sum_i w_i min(closest_i, ||x_i - X[cand_l]||^2). dist (dense X
    only): an (L, n) array of X's dtype that receives the distances ||x_i - X[cand_l]||^2."""
    if (csr := _csr(X)) is not None:
        if dist is not None:
            raise ValueError("dist is only computed for a dense X")
        return _core.csr_kmeanspp_candidate_potentials(*csr, w, closest, cand, n_threads)
    return _core.kmeanspp_candidate_potentials(X, w, closest, cand, n_threads, dist)


def kmeanspp_update_closest(X, closest, center, n_threads):
    """In place: closest_i = min(closest_i, ||x_i - X[center]||^2)."""
    if (csr := _csr(X)) is not None:
        _core.csr_kmeanspp_update_closest(*csr, closest, center, n_threads)
        return
    _core.kmeanspp_update_closest(X, closest, center, n_threads)


def available_simd_levels():
    return list(_core.available_simd_levels())


def selected_simd_level():
    return _core.selected_simd_level()


def set_simd_level(level):
    """Force a SIMD level ("scalar", "avx2", "avx512"); ValueError when unavailable."""
    _core._set_simd_level(level)


def bf16_available():
    """Whether this CPU and build have the bf16 candidate pass (AVX512_BF16)."""
    return bool(_core._bf16_available())


def bf16_enabled():
    """Whether the bf16 candidate pass is in use (available, on, the avx512 level)."""
    return bool(_core._bf16_enabled())


def set_bf16_enabled(on):
    """Turn the bf16 candidate pass on or off (SOFTKMEANS_BF16=0 starts it off); its
    outputs are the float path's bits either way. ValueError when turning it on where
    it is not available."""
    _core._set_bf16_enabled(bool(on))


def amx_available():
    """Whether this CPU, build and Linux give the split-bf16 AMX tiles (the projected
    pass's first step takes them under the kernel choice amx)."""
    return bool(_core._amx_available())


def kernel_choices():
    """The kernel choices made for speed in force: {name: {"value", "source"}}, the source
    saying why ("table: <cpu>", "probe", "default", "override (<variable>)", "set"). An
    ignored SOFTKMEANS_KERNEL_CHOICES appears under its own name with the reason."""
    return {
        name: {"value": value, "source": source} for name, value, source in _core._kernel_choices()
    }


def set_kernel_choices(spec):
    """Apply choices in SOFTKMEANS_KERNEL_CHOICES's syntax ("bf16=off,lane_blocking=2x8") in
    this process; ValueError naming a bad name or value. Outputs keep their bits."""
    _core._set_kernel_choices(str(spec))


def reset_kernel_choices():
    """The kernel choices of process start again (table or probe, then the environment)."""
    _core._reset_kernel_choices()


def build_info():
    """How the core was built, what it runs on and the kernel choices made for it."""
    return {
        "compiler": _core.compiler,
        "openmp": _core.openmp_version,
        "simd_available": available_simd_levels(),
        "simd_selected": selected_simd_level(),
        "bf16_candidates": bf16_enabled(),
        "default_threads": _core.default_threads(),
        "cpu": dict(_core._cpu()),
        "kernel_choices": kernel_choices(),
    }


def default_threads():
    return _core.default_threads()
