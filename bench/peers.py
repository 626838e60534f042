"""Peer implementations and timing helpers for the Python benchmarks.

What softkmeans is compared with, written once so that ``bench/compare.py`` and
``bench/scaling.py`` time every peer the same way:

- scikit-learn ``KMeans(algorithm="lloyd" | "elkan")`` and faiss-cpu ``Kmeans``: the time
  of one iteration from a fixed initial centroid array, measured as the difference of a
  (1 + m)-iteration fit and a 1-iteration fit divided by the extra iterations, so fit
  overhead (validation, copies, centring, norms, the final labelling pass) cancels;
- a straightforward PyTorch CPU centroid step (``torch.cdist`` + ``softmax``, or the
  ``entmax`` package's ``entmax15``) as a user would write it;
- a careful in-place NumPy float32 softmax step: one (n, k) buffer reused across calls,
  BLAS for both products;
- row-wise ``entmax15`` from the ``entmax`` package, and ``torch.softmax`` on the same rows;
- the machine's ceilings: NumPy GEMM rate (float32, float64) and copy bandwidth.

Every peer is optional. ``peer_status()`` says which are installed; constructors of a
missing peer raise ``PeerUnavailable`` with the message to print, which
``skip_message`` formats the same way everywhere.

Thread counts: every peer takes ``n_threads`` and honours it (threadpoolctl limits for
BLAS and OpenMP, ``torch.set_num_threads``, ``faiss.omp_set_num_threads``).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

# --------------------------------------------------------------------------------------
# Availability
# --------------------------------------------------------------------------------------

# peer name -> (module to import, pip requirement that provides it)
PEERS = {
    "sklearn": ("sklearn", "scikit-learn"),
    "faiss": ("faiss", "faiss-cpu"),
    "torch": ("torch", "torch"),
    "entmax": ("entmax", "entmax"),
    "threadpoolctl": ("threadpoolctl", "threadpoolctl"),
    "sklearnex": ("sklearnex", "scikit-learn-intelex"),
    "matplotlib": ("matplotlib", "matplotlib"),
}


class PeerUnavailable(RuntimeError):
    """A peer's package is not installed; the message says what to install."""


def _missing(name: str) -> str | None:
    module, requirement = PEERS[name]
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return f"{requirement} is not installed ({exc}); pip install {requirement}"
    return None


def peer_status() -> dict[str, str | None]:
    """Peer name -> None when importable, else the reason it is not."""
    return {name: _missing(name) for name in PEERS}


def require(*names: str) -> None:
    """Raises PeerUnavailable unless every named peer package is importable."""
    reasons = [r for r in (_missing(n) for n in names) if r is not None]
    if reasons:
        raise PeerUnavailable("; ".join(reasons))


def skip_message(peer: str, reason: str | BaseException) -> str:
    """The one line printed when a peer is skipped."""
    return f"skipped {peer}: {reason}"


# --------------------------------------------------------------------------------------
# Threads
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def thread_limit(n_threads: int | None) -> Iterator[None]:
    """Limits BLAS, OpenMP (threadpoolctl), torch and faiss to n_threads inside the block."""
    if n_threads is None:
        yield
        return
    stack = contextlib.ExitStack()
    with stack:
        try:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(limits=n_threads))
        except ImportError:
            pass
        torch = _maybe_import("torch")
        if torch is not None:
            old = torch.get_num_threads()
            torch.set_num_threads(n_threads)
            stack.callback(torch.set_num_threads, old)
        faiss = _maybe_import("faiss")
        if faiss is not None:
            old_f = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(n_threads)
            stack.callback(faiss.omp_set_num_threads, old_f)
        yield


def _maybe_import(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


# --------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------


@dataclass
class Timed:
    """What a self-timing callable returns: its own measured seconds (e.g. per iteration)
    and anything else worth reporting (objective values, iteration counts)."""

    seconds: float
    extra: dict = field(default_factory=dict)


@dataclass
class Timing:
    """Repeated measurements of one case."""

    name: str
    times: list[float]
    extra: dict = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def best(self) -> float:
        return min(self.times)


def _call_timed(fn: Callable[[], object]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = fn()
    elapsed = time.perf_counter() - t0
    if isinstance(out, Timed):
        return out.seconds, out.extra
    return elapsed, {}


# Seconds of rest before each timed call: a BLAS call's worker threads keep spinning for
# a while after it returns (OpenBLAS: ~0.1 s), and a case timed right after one ran with a
# core taken (the hard step at (1e6, 16, 64) after a 4096^3 sgemm, quiet machine, two runs
# of `python bench/studies/bounded_steps.py --settle`: 62 / 44 GFLOP/s without the rest,
# 74 / 69 with 0.3 s). Not timed.
SETTLE_SECONDS = 0.3


# Seconds one timed measurement lasts at least: a case that takes less is called back to
# back ceil(BURST_SECONDS / its warm-up time) times and the mean counts. After the rest
# above, the first milliseconds of work run slow on these machines (KVM guests: an idle
# vCPU is halted and wakes on demand; caches and predictors are cold): `python
# bench/studies/burst.py` prints the first call after the rest against the calls right after it.
# A single short call would charge that to whichever peer is shorter (a 25 ms pass against
# a 0.8 s sgemm or a 0.4 s NumPy step); a fit runs its passes back to back. Not timed: the
# rest before the burst.
BURST_SECONDS = 0.25


def burst_count(seconds: float) -> int:
    """How many back-to-back calls of a case that took `seconds` make one measurement."""
    return max(1, math.ceil(BURST_SECONDS / max(seconds, 1e-9)))


def timed_burst(fn: Callable[[], object], count: int) -> tuple[float, dict]:
    """Mean seconds (and the last `extra`) of `count` back-to-back calls of fn."""
    total, extra = 0.0, {}
    for _ in range(count):
        seconds, extra = _call_timed(fn)
        total += seconds
    return total / count, extra


def interleaved(
    cases: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1
) -> dict[str, Timing]:
    """Times every case `repeats` times, round-robin (case A, B, C, A, B, C, ...), so that
    machine noise (other processes, frequency changes) hits every case alike, each after
    SETTLE_SECONDS of rest (the previous case's idle threads go to sleep).

    A case returning a `Timed` reports its own seconds; otherwise its wall time counts.
    With a warm-up, a case shorter than BURST_SECONDS is timed as the mean of a burst of
    back-to-back calls (see there). The last `extra` a case returned is kept."""
    counts = dict.fromkeys(cases, 1)
    for _ in range(warmup):
        for name, fn in cases.items():
            counts[name] = burst_count(_call_timed(fn)[0])
    results = {name: Timing(name, []) for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            time.sleep(SETTLE_SECONDS)
            seconds, extra = timed_burst(fn, counts[name])
            results[name].times.append(seconds)
            results[name].extra = extra
    return results


def median_time(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    """Median seconds of fn() (or of its `Timed.seconds`)."""
    return interleaved({"fn": fn}, repeats, warmup)["fn"].median


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------


def make_blobs(n: int, d: int, k: int, dtype=np.float32, seed: int = 0) -> np.ndarray:
    """n points around k Gaussian blob centres (centres ~ N(0, 16 I), points ~ N(centre, I))."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(k, d)).astype(dtype)
    X = rng.standard_normal((n, d), dtype=np.float32).astype(dtype, copy=False)
    X += centres[rng.integers(k, size=n)]
    return X


def initial_centroids(X: np.ndarray, k: int, seed: int = 1) -> np.ndarray:
    """k distinct rows of X, chosen with a fixed seed: the init every peer starts from."""
    rng = np.random.default_rng(seed)
    return np.ascontiguousarray(X[np.sort(rng.choice(X.shape[0], size=k, replace=False))])


def lambda_max(X: np.ndarray) -> float:
    """Largest eigenvalue of the population covariance of X (the critical sigma^2)."""
    Xc = X.astype(np.float64, copy=False)
    mu = Xc.mean(axis=0)
    cov = (Xc.T @ Xc) / Xc.shape[0] - np.outer(mu, mu)
    return float(np.linalg.eigvalsh(cov)[-1])


def distortion(X: np.ndarray, C: np.ndarray, chunk: int = 1 << 16) -> float:
    """J(C) = sum_i min_j ||x_i - c_j||^2 in float64, chunked (a check, not a peer)."""
    C64 = C.astype(np.float64)
    cn = np.einsum("ij,ij->i", C64, C64)
    total = 0.0
    for start in range(0, X.shape[0], chunk):
        x = X[start : start + chunk].astype(np.float64)
        D = np.einsum("ij,ij->i", x, x)[:, None] + cn[None, :] - 2.0 * (x @ C64.T)
        total += float(np.maximum(D.min(axis=1), 0.0).sum())
    return total


# --------------------------------------------------------------------------------------
# Hard k-means peers: time per iteration from a fixed init
# --------------------------------------------------------------------------------------


def _per_iteration(t1: float, n1: int, t2: float, n2: int) -> float:
    if n2 > n1 and t2 > t1:
        return (t2 - t1) / (n2 - n1)
    return t2 / max(n2, 1)  # converged or noise: fall back to the plain average


def sklearn_kmeans(
    X: np.ndarray, C0: np.ndarray, *, algorithm: str = "lloyd", n_threads: int = 2, iters: int = 3
) -> Callable[[], Timed]:
    """One measurement of scikit-learn KMeans' time per iteration from init C0 (n_init=1,
    tol=0). Timed.extra: J after 1 + iters iterations (inertia_), n_iter, centroids."""
    require("sklearn", "threadpoolctl")
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning

    k = C0.shape[0]

    def fit(max_iter: int):
        km = KMeans(
            n_clusters=k, init=C0, n_init=1, max_iter=max_iter, tol=0.0, algorithm=algorithm
        )
        # A cluster emptied by an iteration is scikit-learn's ConvergenceWarning; it does not
        # change what is timed.
        with thread_limit(n_threads), warnings.catch_warnings():
            warnings.simplefilter("ignore", category=ConvergenceWarning)
            t0 = time.perf_counter()
            km.fit(X)
            return time.perf_counter() - t0, km

    def measure() -> Timed:
        t1, km1 = fit(1)
        t2, km2 = fit(1 + iters)
        per = _per_iteration(t1, km1.n_iter_, t2, km2.n_iter_)
        return Timed(
            per,
            {
                "J": float(km2.inertia_),
                "n_iter": int(km2.n_iter_),
                "centroids": km2.cluster_centers_,
            },
        )

    return measure


def faiss_kmeans(
    X: np.ndarray, C0: np.ndarray, *, n_threads: int = 2, iters: int = 3
) -> Callable[[], Timed]:
    """One measurement of faiss-cpu Kmeans' time per iteration from init C0 (float32, no
    subsampling). Timed.extra: faiss' objective at the last iteration's assignment
    ("obj_last", J at the input of that iteration), n_iter, centroids."""
    require("faiss")
    import faiss

    X32 = np.ascontiguousarray(X, dtype=np.float32)
    C32 = np.ascontiguousarray(C0, dtype=np.float32)
    n, d = X32.shape
    k = C32.shape[0]

    def train(niter: int):
        km = faiss.Kmeans(
            d,
            k,
            niter=niter,
            seed=1,
            verbose=False,
            max_points_per_centroid=n // k + 1,  # never subsample
            min_points_per_centroid=1,
        )
        with thread_limit(n_threads):
            t0 = time.perf_counter()
            km.train(X32, init_centroids=C32)
            return time.perf_counter() - t0, km

    def measure() -> Timed:
        t1, _ = train(1)
        t2, km2 = train(1 + iters)
        per = _per_iteration(t1, 1, t2, 1 + iters)
        return Timed(
            per, {"obj_last": float(km2.obj[-1]), "n_iter": 1 + iters, "centroids": km2.centroids}
        )

    return measure


def sklearn_fit(
    X: np.ndarray, C0: np.ndarray, *, max_iter: int, algorithm: str = "lloyd", n_threads: int = 2
) -> Callable[[], Timed]:
    """The whole `KMeans(algorithm, init=C0, n_init=1, max_iter, tol=0).fit(X)` call, timed as
    a user times it. Timed.extra: inertia_, n_iter."""
    require("sklearn", "threadpoolctl")
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning

    def run() -> Timed:
        km = KMeans(
            n_clusters=C0.shape[0], init=C0, n_init=1, max_iter=max_iter, tol=0.0,
            algorithm=algorithm,
        )  # fmt: skip
        with thread_limit(n_threads), warnings.catch_warnings():
            warnings.simplefilter("ignore", category=ConvergenceWarning)
            t0 = time.perf_counter()
            km.fit(X)
            seconds = time.perf_counter() - t0
        return Timed(seconds, {"J": float(km.inertia_), "n_iter": int(km.n_iter_)})

    return run


def faiss_fit(
    X: np.ndarray,
    C0: np.ndarray,
    *,
    max_iter: int,
    n_threads: int = 2,
    max_points_per_centroid: int | None = None,
):
    """The whole faiss-cpu `Kmeans(niter=max_iter).train(X, init_centroids=C0)` call (float32;
    max_points_per_centroid None: no subsampling, else faiss's own sampling of that many
    rows per centroid), timed as a user times it."""
    require("faiss")
    import faiss

    X32 = np.ascontiguousarray(X, dtype=np.float32)
    C32 = np.ascontiguousarray(C0, dtype=np.float32)
    n, d = X32.shape
    k = C32.shape[0]

    def run() -> Timed:
        km = faiss.Kmeans(
            d, k, niter=max_iter, seed=1, verbose=False,
            max_points_per_centroid=max_points_per_centroid or n // k + 1,
            min_points_per_centroid=1,
        )  # fmt: skip
        with thread_limit(n_threads):
            t0 = time.perf_counter()
            km.train(X32, init_centroids=C32)
            seconds = time.perf_counter() - t0
        return Timed(seconds, {"obj_last": float(km.obj[-1])})

    return run


# --------------------------------------------------------------------------------------
# Soft centroid steps
# --------------------------------------------------------------------------------------


def torch_step(
    X: np.ndarray, C: np.ndarray, sigma: float, *, kind: str = "softmax", n_threads: int = 2
) -> Callable[[], np.ndarray]:
    """A straightforward PyTorch CPU centroid step, as a user would write it:
    D = cdist(X, C)^2, r = softmax(-D / 2 sigma^2) (or entmax.entmax15), C+ = r^T X / N.
    Returns a callable that does one step (threads limited inside) and returns C+."""
    require("torch")
    if kind == "entmax15":
        require("entmax")
    elif kind != "softmax":
        raise ValueError(f"torch_step: kind must be 'softmax' or 'entmax15', got {kind!r}")
    import torch

    if kind == "entmax15":
        from entmax import entmax15 as row_map
    else:

        def row_map(z, dim):
            return torch.softmax(z, dim=dim)

    Xt = torch.from_numpy(np.ascontiguousarray(X))
    Ct = torch.from_numpy(np.ascontiguousarray(C))
    scale = -1.0 / (2.0 * sigma * sigma)

    def step() -> np.ndarray:
        with thread_limit(n_threads), torch.no_grad():
            D = torch.cdist(Xt, Ct).square_()
            R = row_map(D.mul_(scale), dim=1)
            N = R.sum(dim=0)
            S = R.T @ Xt
            keep = N > 0
            out = Ct.clone()
            out[keep] = S[keep] / N[keep, None]
        return out.numpy()

    return step


class NumpySoftmaxStep:
    """A careful in-place NumPy softmax centroid step (the issue's "careful NumPy" peer).

    One (n, k) buffer B, allocated once and reused by every call; BLAS for both
    products; nothing else of size n x k:
        B = X C^T;  B = 2 B - ||c||^2        (= ||x||^2 - D, a per-row shift of -D)
        m = max_j B;  B = exp((B - m) / 2 sigma^2);  s = sum_j B;  B /= s
        N = sum_i B;  S = B^T X;  C+ = S / N
    The row shift by ||x||^2 and by m leaves softmax unchanged. F_sigma is returned too:
    lse_i = log s_i + (m_i - ||x_i||^2) / (2 sigma^2), F = sum_i -2 sigma^2 lse_i.
    """

    def __init__(self, X: np.ndarray, k: int, sigma: float, n_threads: int = 2):
        self.X = np.ascontiguousarray(X)
        self.B = np.empty((X.shape[0], k), dtype=X.dtype)
        self.xn = np.einsum("ij,ij->i", self.X, self.X)
        self.inv_t = X.dtype.type(1.0 / (2.0 * sigma * sigma))
        self.sigma = sigma
        self.n_threads = n_threads

    @property
    def buffer_bytes(self) -> int:
        return self.B.nbytes

    def __call__(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        X, B = self.X, self.B
        with thread_limit(self.n_threads):
            np.matmul(X, C.T, out=B)
            B *= 2
            B -= np.einsum("ij,ij->i", C, C)[None, :]
            m = B.max(axis=1)
            B -= m[:, None]
            B *= self.inv_t
            np.exp(B, out=B)
            s = B.sum(axis=1)
            B /= s[:, None]
            N = B.sum(axis=0, dtype=np.float64)
            S = B.T @ X
        lse = np.log(s.astype(np.float64)) + (m - self.xn).astype(np.float64) * float(self.inv_t)
        F = float(-2.0 * self.sigma**2 * lse.sum())
        out = C.copy()
        keep = N > 0
        out[keep] = (S[keep] / N[keep, None]).astype(C.dtype)
        return out, N, F


# --------------------------------------------------------------------------------------
# Row maps on an (n, k) score matrix
# --------------------------------------------------------------------------------------


def entmax_rows(Z: np.ndarray, *, n_threads: int = 2) -> Callable[[], object]:
    """The `entmax` package's entmax15 over the rows of Z (torch CPU)."""
    require("torch", "entmax")
    import torch
    from entmax import entmax15

    Zt = torch.from_numpy(np.ascontiguousarray(Z))

    def run():
        with thread_limit(n_threads), torch.no_grad():
            return entmax15(Zt, dim=1)

    return run


def torch_softmax_rows(Z: np.ndarray, *, n_threads: int = 2) -> Callable[[], object]:
    """torch.softmax over the rows of Z: what a plain row map costs in torch."""
    require("torch")
    import torch

    Zt = torch.from_numpy(np.ascontiguousarray(Z))

    def run():
        with thread_limit(n_threads), torch.no_grad():
            return torch.softmax(Zt, dim=1)

    return run


# --------------------------------------------------------------------------------------
# Ceilings
# --------------------------------------------------------------------------------------


def sgemm_call(size: int, n_threads: int) -> tuple[Callable[[], object], float]:
    """A square float32 matrix product of `size` through NumPy's BLAS at n_threads, to
    time interleaved with a kernel (the same-run sgemm), and its flops (2 size^3)."""
    from threadpoolctl import threadpool_limits

    A = np.random.default_rng(0).standard_normal((size, size), dtype=np.float32)
    out = np.empty_like(A)

    def gemm():
        with threadpool_limits(n_threads):
            np.matmul(A, A, out=out)

    return gemm, 2.0 * size**3


def gemm_rate(dtype=np.float32, *, n_threads: int = 2, size: int = 2048, repeats: int = 5) -> float:
    """The machine's matrix-product rate through NumPy's BLAS, GFLOP/s (2 size^3 per call)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((size, size)).astype(dtype)
    B = rng.standard_normal((size, size)).astype(dtype)
    out = np.empty((size, size), dtype=dtype)
    with thread_limit(n_threads):
        t = median_time(lambda: np.matmul(A, B, out=out), repeats=repeats, warmup=1)
    return 2.0 * size**3 / t * 1e-9


def copy_bandwidth(*, n_threads: int = 2, nbytes: int = 1 << 28, repeats: int = 5) -> float:
    """Memory bandwidth of a large copy, GB/s, counting bytes read plus bytes written.
    The copy is split into n_threads slices copied concurrently (numpy releases the GIL)."""
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    parts = np.array_split(np.arange(src.size), n_threads)
    bounds = [(int(p[0]), int(p[-1]) + 1) for p in parts if p.size]
    pool = ThreadPoolExecutor(max_workers=n_threads)

    def one(b):
        np.copyto(dst[b[0] : b[1]], src[b[0] : b[1]])

    def run():
        list(pool.map(one, bounds))

    try:
        t = median_time(run, repeats=repeats, warmup=1)
    finally:
        pool.shutdown()
    return 2.0 * src.nbytes / t * 1e-9


def ceilings(*, n_threads: int = 2, quick: bool = False) -> dict[str, float]:
    """GEMM float32/float64 GFLOP/s and copy GB/s at n_threads."""
    size = 1024 if quick else 2048
    nbytes = 1 << 26 if quick else 1 << 28
    return {
        "gemm_f32_gflops": gemm_rate(np.float32, n_threads=n_threads, size=size),
        "gemm_f64_gflops": gemm_rate(np.float64, n_threads=n_threads, size=size),
        "copy_gbps": copy_bandwidth(n_threads=n_threads, nbytes=nbytes),
    }
