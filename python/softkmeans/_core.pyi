"""Type stubs of the native core (cpp/bindings/module.cpp). Use the softkmeans package API;
these entry points expect validated, C-contiguous arrays (X and C of one dtype, float32 or
float64; weights and `closest` float64; indices int64). n_threads <= 0 is the OpenMP default."""

import numpy as np
import numpy.typing as npt

_F = npt.NDArray[np.floating]
_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]

compiler: str
openmp_version: int
small_dim: int

def sq_distances(X: _F, C: _F, n_threads: int = 0) -> _F: ...
def assign(X: _F, C: _F, n_threads: int = 0) -> tuple[_I64, _F]: ...
def margins(X: _F, C: _F, n_threads: int = 0) -> _F: ...
def entmax15(Z: _F, n_threads: int = 0) -> _F: ...
def responsibilities(X: _F, C: _F, kind: str, sigma: float, n_threads: int = 0) -> _F: ...
def block_stats(
    X: _F,
    C: _F,
    kind: str,
    sigma: float,
    sample_weight: _F64,
    n_threads: int = 0,
    sums: bool = True,
    labels: bool = False,
    grad_x: bool = False,
) -> tuple[float, _F64 | None, _F64 | None, float, float, float, _I64 | None, _F | None]:
    """(W, N, S, objective, distortion, min_margin, labels, grad_X) of the rows of X, one
    fused pass; N (k,) and S (k, d) with `sums`, labels (n,) with `labels`, grad_X (n, d)
    with `grad_x`, None where not asked."""

def hard_stats_bounded(
    X: _F,
    C: _F,
    C_prev: _F | None,
    sample_weight: _F64,
    labels: _I64,
    lower: _F64,
    group: _I64,
    exact: bool = False,
    n_threads: int = 0,
) -> tuple[float, _F64, _F64, float, float, int, int]:
    """(W, N, S, distortion, min_margin, n_computed, n_distances) of the hard step with
    group distance bounds; labels (n,) and lower (n, t) updated in place."""

def assign_grouped(
    X: _F, C: _F, group: _I64, n_threads: int = 0, margins: bool = False
) -> tuple[_I64, _F, int] | tuple[_I64, _F, _F, npt.NDArray[np.float64], int]:
    """(labels, min_sq_dist, n_distances): assign's, computing only the centroid groups that
    may hold a row's nearest; margins: (labels, min_sq_dist, second, beyond, n_distances)."""

def assign_projected(
    X: _F,
    C: _F,
    Q: npt.NDArray[np.float64],
    mu: npt.NDArray[np.float64],
    n_threads: int = 0,
    margins: bool = False,
) -> tuple[_I64, _F, int] | tuple[_I64, _F, _F, npt.NDArray[np.float64], int]:
    """assign_grouped's outputs, computing only the centroids whose distance in the projection
    on Q's columns about mu (with the residual's norm) may be the row's least."""

def balanced_auction(
    cand: _I64,
    cost: _F64,
    beyond: _F64,
    w: _F64,
    caps: _F64,
    prices: _F64,
    owner: _I64,
    free_at_zero: bool,
    eps: float,
    max_bids: int,
) -> tuple[int, _I64, _F64, int]: ...
def balanced_counts(
    D: _F64,
    targets: _I64,
    g: _F64,
    owner: _I64,
    rows_per_move: int,
    band: float,
    edges_per_row: int,
    slack: float,
    max_tries: int,
) -> tuple[int, _I64, _F64, int, int]: ...
def feature_moments(
    X: _F, sample_weight: _F64, chunk_rows: int, n_threads: int = 0
) -> tuple[_F64, _F64, _F64, _F64, npt.NDArray[np.bool_]]:
    """(W, mean, M2, max_abs, finite) of each chunk of chunk_rows rows"""

def row_uniforms(seed: int, round: int, start: int, stop: int, n_threads: int = 0) -> _F64:
    """(stop - start,) hashed uniforms of rows start..stop-1 in `round` for `seed`"""

def take_closer(
    dist: _F, labels: _I64, first: int, closest: _F64, nearest: _I64, n_threads: int = 0
) -> None:
    """in place where dist < closest: closest = dist, nearest = labels + first"""

def weighted_covariance(X: _F, sample_weight: _F64, n_threads: int = 0) -> tuple[_F64, _F64]:
    """(mean (d,), weighted population covariance (d, d))"""

def second_moment_matvec(
    X: _F, sample_weight: _F64, mean: _F64 | None, v: _F64, n_threads: int = 0
) -> _F64:
    """sum_i w_i ((x_i - mean) . v) (x_i - mean), float64 (d,) (mean None: 0)"""

def kmeanspp_candidate_potentials(
    X: _F,
    sample_weight: _F64,
    closest: _F64,
    cand_idx: _I64,
    n_threads: int = 0,
    dist: _F | None = None,
) -> _F64:
    """(L,): sum_i w_i min(closest_i, ||x_i - X[cand_idx[l]]||^2), one fused pass; dist
    (L, n) of X's dtype, if given, receives the distances ||x_i - X[cand_idx[l]]||^2."""

def kmeanspp_update_closest(X: _F, closest: _F64, center_idx: int, n_threads: int = 0) -> None:
    """In place: closest_i = min(closest_i, ||x_i - X[center_idx]||^2) (direct differences
    in X's dtype: the bits kmeanspp_candidate_potentials gives the same distance)."""

# The csr_* kernels: X as a canonical CSR matrix (data (nnz,) float32/float64; indices
# (nnz,) and indptr (n + 1,) both int32 or both int64, columns strictly increasing within a
# row, checked here) with n_features columns; C dense (k, n_features) of X's dtype.
_Idx = npt.NDArray[np.integer]

def csr_sq_distances(
    X_data: _F, X_indices: _Idx, X_indptr: _Idx, n_features: int, C: _F, n_threads: int = 0
) -> _F: ...
def csr_assign(
    X_data: _F, X_indices: _Idx, X_indptr: _Idx, n_features: int, C: _F, n_threads: int = 0
) -> tuple[_I64, _F]: ...
def csr_margins(
    X_data: _F, X_indices: _Idx, X_indptr: _Idx, n_features: int, C: _F, n_threads: int = 0
) -> _F: ...
def csr_responsibilities(
    X_data: _F,
    X_indices: _Idx,
    X_indptr: _Idx,
    n_features: int,
    C: _F,
    kind: str,
    sigma: float,
    n_threads: int = 0,
) -> _F: ...
def csr_block_stats(
    X_data: _F,
    X_indices: _Idx,
    X_indptr: _Idx,
    n_features: int,
    C: _F,
    kind: str,
    sigma: float,
    sample_weight: _F64,
    n_threads: int = 0,
    sums: bool = True,
    labels: bool = False,
    grad_x: bool = False,
) -> tuple[float, _F64 | None, _F64 | None, float, float, float, _I64 | None, _F | None]:
    """As block_stats; grad_X is dense (n, n_features)."""

def csr_kmeanspp_candidate_potentials(
    X_data: _F,
    X_indices: _Idx,
    X_indptr: _Idx,
    n_features: int,
    sample_weight: _F64,
    closest: _F64,
    cand_idx: _I64,
    n_threads: int = 0,
) -> _F64: ...
def csr_kmeanspp_update_closest(
    X_data: _F,
    X_indices: _Idx,
    X_indptr: _Idx,
    n_features: int,
    closest: _F64,
    center_idx: int,
    n_threads: int = 0,
) -> None: ...
def csr_second_moment_matvec(
    X_data: _F,
    X_indices: _Idx,
    X_indptr: _Idx,
    n_features: int,
    sample_weight: _F64,
    v: _F64,
    n_threads: int = 0,
) -> _F64:
    """X^T diag(w) X v, float64 (n_features,)."""

def available_simd_levels() -> list[str]: ...
def selected_simd_level() -> str: ...
def _set_simd_level(level: str) -> None: ...
def _bf16_available() -> bool: ...
def _bf16_enabled() -> bool: ...
def _set_bf16_enabled(on: bool) -> None: ...
def _bf16_distance_bounds(
    X: npt.NDArray[np.float32], C: npt.NDArray[np.float32]
) -> tuple[_F64, _F64, npt.NDArray[np.bool_]] | None:
    """(D~, eps, candidates) of every pair by the bf16 pass (cpp/bindings/bf16.cpp)."""

def _amx_available() -> bool: ...
def _amx_distances(
    X: npt.NDArray[np.float32], C: npt.NDArray[np.float32], shift: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32] | None:
    """D~ (n, k) of the split-bf16 tiles (cpp/bindings/bf16.cpp), None without them."""

def _amx_sq_slack(xu: float, cu: float, dist_sq: float, dim: int) -> float: ...

def _kernel_choices() -> list[tuple[str, str, str]]:
    """(name, value, source) of every kernel choice in force (cpp/bindings/choices.cpp)."""

def _set_kernel_choices(spec: str) -> None: ...
def _reset_kernel_choices() -> None: ...
def _cpu() -> dict[str, str | int | bool]: ...
def default_threads() -> int: ...
