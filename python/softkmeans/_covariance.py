"""The weighted population covariance of X as an operator (SPEC.md, "Critical temperature"),
one implementation for dense and CSR rows: lambda_max (and its eigenvector) without a
(d, d) matrix for wide X.

Sigma = sum_i w_i (s_i x_i - mu)(s_i x_i - mu)^T / W, mu = sum_i w_i s_i x_i / W, over the
rows x_i of one or more blocks (s_i = 1, or cosine's row scales,
`softkmeans.sources.normalized`). Up to DENSE_D features the matrix is formed (the native
`weighted_covariance` for dense rows, merged over blocks) and eigvalsh'd: exact to
rounding. Wider, nothing of size d x d exists: each product Sigma v is one pass over the
rows (O(n d)), and `largest_eigenpair` runs Lanczos on it to a stated tolerance.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np

from . import _native, _stats

__all__ = [
    "DENSE_D",
    "LANCZOS_TOL",
    "Covariance",
    "diagonal_block",
    "largest_eigenpair",
    "product_block",
    "row_sum_block",
    "second_moment_block",
]

# Up to this d the covariance is formed (d x d, 2 MiB) and eigvalsh'd.
DENSE_D = 512
# Lanczos stops once the Ritz value theta is within LANCZOS_TOL x theta of lambda_max by
# the a-posteriori bound below (float64's parity tolerance, SPEC.md).
LANCZOS_TOL = 1e-10
MAX_LANCZOS_STEPS = 300
# Lanczos keeps its basis (steps x d float64, reorthogonalized in full): at most this much.
_MAX_BASIS_BYTES = 1 << 28
# Dense rows are widened to float64 about this many bytes at a time.
_CHUNK_BYTES = 1 << 20


def _is_dense(rows):
    return isinstance(rows, np.ndarray)


def _dense_chunks(rows, w):
    """(float64 rows, their weights) of a dense block, about a MiB at a time."""
    step = max(1, _CHUNK_BYTES // (8 * rows.shape[1]))
    for s in range(0, rows.shape[0], step):
        yield np.array(rows[s : s + step], dtype=np.float64), w[s : s + step]


def row_sum_block(rows, w, scale):
    """(W, sum_i w_i s_i x_i (d,) float64, rows) of one block."""
    if not _is_dense(rows):
        total = rows.T @ (w if scale is None else w * scale)
        return float(w.sum()), np.asarray(total, dtype=np.float64), rows.shape[0]
    out = np.zeros(rows.shape[1])
    for chunk, wc in _dense_chunks(rows, w):
        out += wc @ chunk
    return float(w.sum()), out, rows.shape[0]


def product_block(rows, w, scale, mean, vec, n_threads):
    """(the block's share of W Sigma v (d,), the weight of its rows left uncentred).

    Dense rows are centred as they are read (the core's `second_moment_matvec`); CSR
    rows cannot be (centring would densify them): for those the second moment, whose
    mean term the operator subtracts once for all of them.
    NOTE: where the mean is large against the spread that difference cancels, and
    lambda_max loses the digits the ratio costs (sparse data has a mean near 0).
    """
    if _is_dense(rows):
        return _native.second_moment_matvec(rows, w, mean, vec, n_threads), 0.0
    w2 = w if scale is None else w * scale**2
    return _native.csr_second_moment_matvec(rows, w2, vec, n_threads), float(w.sum())


def diagonal_block(rows, w, scale, mean):
    """`product_block` for the diagonal of W Sigma."""
    out = np.zeros(rows.shape[1])
    if not _is_dense(rows):
        squares = rows.astype(np.float64)  # float64: float32 squares underflow below 1e-19
        squares.data **= 2
        return squares.T @ (w if scale is None else w * scale**2), float(w.sum())
    for chunk, wc in _dense_chunks(rows, w):
        chunk -= mean
        out += wc @ (chunk * chunk)
    return out, 0.0


def second_moment_block(rows, w, scale):
    """(sum_i w_i s_i^2 x_i x_i^T (d, d) float64,) of a block of CSR rows."""
    w2 = w if scale is None else w * scale**2
    weighted = rows.multiply(w2[:, None]).tocsr()
    return (np.asarray((rows.T @ weighted).toarray(), dtype=np.float64),)


class Covariance:
    """Sigma of rows given in blocks, as an operator: ``mean``, ``W``, ``diagonal()``,
    ``matvec(v)``, ``dense()`` (d <= DENSE_D), ``lambda_max()`` and ``top()``.

    blocks: a callable giving, on each call, an iterable of (rows (m, d) dense or CSR,
    w (m,) float64, row scale (m,) or None) (a source's blocks, read again per product).
    """

    def __init__(self, blocks, n_threads=0):
        self._blocks = blocks
        self._reduce = self._reduce_blocks
        self.n_threads = n_threads
        self._matrix = None
        self._diag = None
        formed, sums, self.W, self.d, self.n = [], 0.0, 0.0, 0, 0
        for rows, w, scale in blocks():
            self.n, self.d = self.n + rows.shape[0], rows.shape[1]
            if scale is not None and _is_dense(rows):
                raise TypeError("a row scale applies to CSR rows (dense ones come scaled)")
            Wb = float(w.sum())
            if self.d <= DENSE_D and _is_dense(rows):  # formed: the native pass per block
                if Wb > 0:
                    formed.append((Wb, *_native.weighted_covariance(rows, w, n_threads)))
            else:
                sums = sums + row_sum_block(rows, w, scale)[1]
                self.W += Wb
        if formed:
            self.W = sum(part[0] for part in formed)
            self.mean, self._matrix = _merged(formed)
        elif self.W > 0:
            self.mean = sums / self.W
        else:
            raise ValueError("a covariance needs a block of positive weight")

    @classmethod
    def of_passes(cls, reduce, n_threads=0):
        """The operator (never formed) over blocks read by passes: ``reduce(block_fn,
        *args)`` is the elementwise sum over the blocks of ``block_fn(rows, w, scale,
        *args)`` (a tuple of arrays and floats), e.g. one pass of a Dask source's runner.
        Callers check ``W`` (> 0, finite) before using it."""
        self = cls.__new__(cls)
        self._blocks, self._reduce, self.n_threads = None, reduce, n_threads
        self._matrix = self._diag = None
        self.W, sums, n = reduce(row_sum_block)
        self.n, self.d = int(n), len(sums)
        self.mean = sums / self.W if self.W > 0 else np.zeros(self.d)
        return self

    def _reduce_blocks(self, block_fn, *args):
        """The sum over the blocks, in block order, of block_fn(rows, w, scale, *args)."""
        total = None
        for rows, w, scale in self._blocks():
            part = block_fn(rows, w, scale, *args)
            total = part if total is None else tuple(a + b for a, b in zip(total, part))
        return total

    @classmethod
    def of(cls, X, w, n_threads=0, row_scale=None):
        """The covariance of one block X (dense or CSR) under weights w."""
        return cls(lambda: [(X, w, row_scale)], n_threads)

    def diagonal(self):
        """The weighted variances (d,)."""
        if self._diag is None:
            if self._matrix is not None:
                self._diag = np.diagonal(self._matrix).copy()
            else:
                self._diag = np.maximum(self._apply(None, diagonal=True), 0.0)
        return self._diag

    def matvec(self, vec):
        """Sigma v (d,) float64: one pass over the rows."""
        vec = np.ascontiguousarray(np.ravel(vec), dtype=np.float64)
        if self._matrix is not None:
            return self._matrix @ vec
        return self._apply(vec)

    def _apply(self, vec, diagonal=False):
        """Sigma v, or (diagonal) the diagonal of Sigma, from a pass over the blocks
        (`product_block`, `diagonal_block`)."""
        if diagonal:
            out, uncentred = self._reduce(diagonal_block, self.mean)
        else:
            out, uncentred = self._reduce(product_block, self.mean, vec, self.n_threads)
        if uncentred:
            # sum over the CSR rows of w (x - mu)(x - mu)^T = second moment - W_csr mu mu^T
            # (their weighted sum is W_csr mu when every block is CSR).
            out = out - uncentred * self.mean * (self.mean if diagonal else (self.mean @ vec))
        return out / self.W

    def dense(self):
        """The (d, d) matrix (for d <= DENSE_D: larger ones are never formed)."""
        if self._matrix is None:
            if self.d > DENSE_D:
                raise ValueError(f"a covariance of d = {self.d} > {DENSE_D} is not formed")
            (second,) = self._reduce(second_moment_block)  # CSR rows (dense ones are formed)
            self._matrix = second / self.W - np.outer(self.mean, self.mean)
        return self._matrix

    def top(self):
        """(lambda_max clamped at 0, a unit eigenvector (d,))."""
        if self.d <= DENSE_D:
            values, vectors = np.linalg.eigh(self.dense())
            return max(float(values[-1]), 0.0), vectors[:, -1]
        # The rank is below n: Lanczos ends (invariant) within n + 1 steps.
        return largest_eigenpair(self.matvec, self.d, max_steps=min(MAX_LANCZOS_STEPS, self.n + 1))

    def lambda_max(self) -> float:
        if self.d <= DENSE_D:
            return max(float(np.linalg.eigvalsh(self.dense())[-1]), 0.0)
        return self.top()[0]

    @classmethod
    def merged(cls, parts):
        """The covariance of the union of the blocks of several operators (annealing's
        per-cluster covariances, block by block)."""
        operators = [cov for _, _, cov in parts]
        return cls(lambda: [b for cov in operators for b in cov._blocks()], operators[0].n_threads)


def _merged(parts):
    """(mean, covariance) of dense blocks given as (W_b, mean_b, cov_b)."""
    if len(parts) == 1:
        return parts[0][1], parts[0][2]
    _, mean, cov = _stats.merge_moments(parts)
    return mean, cov


def _one_blas_thread():
    """BLAS on one thread (threadpoolctl, where installed): Lanczos makes many small BLAS
    calls (a 75 x 75 eigh, gemv on a MiB), which OpenBLAS's threads slow down by up to
    100x on a busy machine (measured: 126 ms against 0.95 ms for the eigh)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - an optional dependency
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def largest_eigenpair(matvec, d, *, tol=LANCZOS_TOL, max_steps=MAX_LANCZOS_STEPS):
    """(theta, unit vector (d,)): the largest eigenvalue of a symmetric positive
    semi-definite operator by Lanczos with full reorthogonalization, theta clamped at 0.

    Each step costs one matvec. Ritz values never exceed lambda_max, and with residual
    r = |beta_m s_m| some eigenvalue lies within min(r, r^2 / gap) of theta (gap: theta
    less the second Ritz value); the run stops when that bound is <= tol x theta, when the
    Krylov space is invariant (exact), or after max_steps (a RuntimeWarning then gives the
    bound reached). The start vector is fixed (a seeded Gaussian), so every call on the
    same operator gives the same value. BLAS runs on one thread meanwhile.
    NOTE: the gap bound takes the second Ritz value for lambda_2 (Ritz values approach it
    from below, so the bound can be optimistic before lambda_2 has converged); measured on
    uniform, blob, low-rank and isotropic data the error was within it.
    """
    with _one_blas_thread():
        return _lanczos(matvec, d, tol, int(max(2, min(max_steps, d, _MAX_BASIS_BYTES // (8 * d)))))


def _lanczos(matvec, d, tol, steps):
    basis = np.empty((min(steps, 16), d))  # grown by doubling: most runs take few steps
    q = np.random.default_rng(0).standard_normal(d)
    basis[0] = q / np.linalg.norm(q)
    alpha, beta = [], []
    theta, s, bound = 0.0, np.ones(1), np.inf
    for m in range(1, steps + 1):
        z = matvec(basis[m - 1])
        alpha.append(float(basis[m - 1] @ z))
        Q = basis[:m]
        z -= Q.T @ (Q @ z)
        z -= Q.T @ (Q @ z)  # twice is enough (Kahan-Parlett)
        b = float(np.linalg.norm(z))
        T = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
        ritz, vectors = np.linalg.eigh(T)
        theta, s = float(ritz[-1]), vectors[:, -1]
        residual = abs(b * s[-1])
        gap = theta - ritz[-2] if m > 1 else 0.0
        bound = min(residual, residual**2 / gap) if gap > 0 else residual
        if b <= 1e-14 * max(abs(theta), 1e-300) or bound <= tol * abs(theta) or m == steps:
            break
        beta.append(b)
        if m == basis.shape[0]:
            basis = np.concatenate([basis, np.empty((min(m, steps - m), d))])
        basis[m] = z / b
    if bound > tol * abs(theta) and b > 1e-14 * max(abs(theta), 1e-300):
        warnings.warn(
            f"lambda_max: Lanczos stopped after {m} steps within {bound / abs(theta or 1):.1e} "
            f"(relative) of an eigenvalue, not {tol:.0e}",
            RuntimeWarning,
            stacklevel=3,
        )
    vector = basis[: len(s)].T @ s
    return max(theta, 0.0), vector / np.linalg.norm(vector)
