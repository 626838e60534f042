"""In-process sources: what every one shares (`LocalSource`: its shape, validated
weights and threads), a C-contiguous array read in place (`ArraySource`), and anything
else read by row slices (`RowBlockSource`: Fortran-ordered or strided arrays, DataFrame
values, h5py / zarr datasets).

Validation is one pass in row blocks: finiteness and magnitude (one min and one max
reduction a block) and, for a fit, the weighted mean and variance of every feature
(Chan, Golub & LeVeque's merge of the blocks' moments), which give the tolerance without
a covariance.

A row-sliceable array-like that is not a NumPy array is, for a fit, copied once block by
block into a temporary memory-mapped file (in ``TMPDIR``; removed by `close`): the fit's
many passes then read the page cache, and the process's anonymous memory holds one block.
Predictions read it by row blocks, once.
"""

from __future__ import annotations

import functools
import mmap
import os
import tempfile
import weakref

import numpy as np

from .. import _native
from .. import _validation as v
from .base import Source
from .readahead import file_blocks
from .runner import Pass, run_blocks, transformed

__all__ = [
    "LocalSource",
    "ROW_BLOCK_BYTES",
    "file_backed",
    "SCAN_BYTES",
    "ArraySource",
    "CHECK_VALUES",
    "FEATURE_MOMENTS",
    "FeatureMoments",
    "check_weights",
    "chunk_moments",
    "check_values",
    "RowBlockSource",
    "spool",
]

# Bytes of X copied at a time: large enough that a block amortises a kernel call (and its
# thread team) many times over, small next to any X worth not copying.
ROW_BLOCK_BYTES = 1 << 22
# The most rows read from a row-sliceable array-like (h5py, zarr) at a time.
ARRAY_LIKE_ROWS = 1 << 16
# Bytes of X a validation block reads (in cache for its few reductions).
SCAN_BYTES = 1 << 20
# Bytes of a memory-mapped X read at a time where each block is transformed (cosine's
# normalized rows): the transformed copy is anonymous memory, the file's pages are not.
TRANSFORMED_BLOCK_BYTES = 1 << 22


def check_weights(sample_weight, n, fit=False):
    """Validated (n,) float64 weights (None: all ones); for a fit, all zeros get their
    own message (the functional API's is `softkmeans._validation`'s)."""
    try:
        return v.check_sample_weight(sample_weight, n)
    except ValueError:
        if fit and sample_weight is not None:
            arr = np.asarray(sample_weight)
            if arr.ndim == 1 and arr.size == n and arr.dtype.kind in "biuf" and not arr.any():
                raise ValueError(
                    "sample_weight is all zero: at least one weight must be positive"
                ) from None
        raise


class LocalSource(Source):
    """A source in this process: X is read as row blocks (`blocks`), each a C-contiguous
    array or a CSR matrix the native kernels take. With one block every result is the
    kernels' own, bit for bit."""

    def __init__(self, shape, sample_weight=None, n_threads=0, fit=False):
        """X's shape and its weights, validated and held (None: all ones; fit: a fit's
        messages); subclasses set ``data`` and ``dtype``."""
        self.shape = tuple(int(s) for s in shape)
        self.rows_per_pass = self.shape[0]
        self.n_threads = n_threads
        self.weights = check_weights(sample_weight, self.shape[0], fit)
        self.unit_weights = sample_weight is None

    kind = "dense"


def chunk_moments(rows, w, n_threads=1):
    """[(W, mean, M2)] of the features under the weights w (n_b,) of rows (n_b, d), a
    chunk of SCAN_BYTES of float64 at a time, in row order (chunks of weight 0 left out):
    the native read (`_native.feature_moments`; each sum sequential over a chunk's rows,
    the chunks in parallel on n_threads; one by default: a block task's), whose bits do not
    depend on the thread count."""
    rows = np.ascontiguousarray(rows, dtype=v.float_dtype_of(rows.dtype))
    W, mean, M2, _, _ = _chunked_moments(rows, w, n_threads)
    return [(float(W[c]), mean[c], M2[c]) for c in range(W.size) if W[c] > 0]


def _chunked_moments(rows, w, n_threads):
    """`_native.feature_moments` of a dense block of float32/float64 rows (a source's
    block; `chunk_moments` converts any rows) in chunks of SCAN_BYTES of float64."""
    rows = np.ascontiguousarray(rows)
    w = np.ascontiguousarray(w, dtype=np.float64)
    if rows.size == 0:  # an empty block (a Dask chunk, say): no chunk
        d = rows.shape[1]
        return np.zeros(0), np.zeros((0, d)), np.zeros((0, d)), np.zeros(0), np.ones(0, bool)
    step = max(1, SCAN_BYTES // (8 * rows.shape[1]))
    return _native.feature_moments(rows, w, step, n_threads)


def _joined(parts):
    """Lists of consecutive blocks' items, joined in order."""
    return [item for part in parts for item in part]


def _moments_block(rows, w, start):
    return chunk_moments(rows, w)


# The features' weighted moments: [(W, mean, M2)] of the chunks in row order, folded in
# that order by `FeatureMoments.add_all` (the same bits however X is cut into blocks
# whose lengths are multiples of the chunks').
FEATURE_MOMENTS = Pass("feature_moments", _moments_block, _joined)


class FeatureMoments:
    """Running (W, mean, M2) of the features under the weights, merged block by block."""

    def __init__(self, d):
        self.W, self.mean, self.M2 = 0.0, np.zeros(d), np.zeros(d)

    def add(self, rows, w):
        """Fold in rows (n_b, d) with weights w (n_b,) (`chunk_moments`)."""
        return self.add_all(chunk_moments(rows, w))

    def add_all(self, parts):
        """Fold in (W, mean, M2) of consecutive chunks, in order."""
        for moments in parts:
            self.merge(*moments)
        return self

    def merge(self, Wb, mean_b, M2_b):
        """Fold in another block's (W, mean, M2) (Chan, Golub & LeVeque)."""
        if not Wb > 0:
            return self
        W = self.W + Wb
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (Wb / W)
        self.M2 = self.M2 + M2_b + delta * delta * (self.W * Wb / W)
        self.W = W
        return self

    def variances(self):
        return self.M2 / self.W


def _checked_block(rows, w, start, name, scan_rows, moments, n_threads):
    """A block's validation: finiteness and magnitude (the errors of
    `softkmeans._validation`); moments: also the features' weighted moments of its rows,
    [(W, mean, M2)] (`chunk_moments`, one native read for both), else [] (the checks
    `scan_rows` rows at a time, None: the block at once)."""
    if moments:
        W, mean, M2, max_abs, finite = _chunked_moments(rows, w, n_threads)
        _check_finite_and_magnitude(rows, name, finite.all(), float(max_abs.max(initial=0.0)))
        return [(float(W[c]), mean[c], M2[c]) for c in range(W.size) if W[c] > 0]
    step = max(1, rows.shape[0] if scan_rows is None else scan_rows)
    for s in range(0, rows.shape[0], step):
        part = rows[s : s + step]
        lo, hi = float(part.min()), float(part.max())
        finite = np.isfinite(lo) and np.isfinite(hi)
        _check_finite_and_magnitude(part, name, finite, max(hi, -lo) if finite else 0.0)
    return []


def _check_finite_and_magnitude(rows, name, finite, max_abs):
    if not finite:
        raise ValueError(f"{name} contains NaN or infinity")
    v.check_magnitude(rows, name, max_abs)


# The validation pass: args name (in the errors), scan_rows, moments (a fit's), n_threads.
CHECK_VALUES = Pass("check_values", _checked_block, _joined)


def check_values(blocks, weights, name, fit=False, scan_rows=None, n_threads=0):
    """The validation pass (`CHECK_VALUES`) over (start, stop, rows) blocks, run by the
    runner; fit: also the features' weighted variances, returned (else None)."""
    parts = run_blocks(blocks, weights, CHECK_VALUES, name, scan_rows, fit, n_threads)
    if not fit:
        return None
    # A fit's weights have a positive sum (`check_weights`): some chunk has moments.
    return FeatureMoments(parts[0][1].size).add_all(parts).variances()


class _DenseSource(LocalSource):
    """What the two dense sources share: rows, distinct rows, moments by blocks."""

    def _in_memory(self):
        return isinstance(self.data, np.ndarray)

    def rows(self, idx):
        return transformed(self._raw_rows(idx), self.transforms)

    def subset(self, idx):
        """In memory for an in-memory X; for a file-backed or array-like X, a temporary
        file-backed copy (`spool`) with X's transforms: the sample adds no anonymous
        memory of its size."""
        weights = None if self.unit_weights else self.weights[idx]
        if self._in_memory() and not file_backed(self.data):
            out = ArraySource(self.rows(idx), weights, n_threads=self.n_threads, checked=True)
        else:
            out = spool(_Gathered(self.data, idx), weights, n_threads=self.n_threads)
            out.transforms = self.transforms
        out.directions = self.directions
        return out


class _Gathered:
    """The rows idx (sorted) of X as a row-sliceable array-like (what `spool` copies)."""

    def __init__(self, X, idx):
        self.X, self.idx = X, np.asarray(idx, dtype=np.int64)
        self.shape = (self.idx.size, X.shape[1])
        self.dtype = X.dtype

    def __getitem__(self, rows):
        return self.X[self.idx[rows]]


class ArraySource(_DenseSource):
    """A C-contiguous float32/float64 array (or np.memmap), read in place: in one block,
    or, a memory-mapped file larger than MIN_FILE_BYTES, in blocks read ahead of the
    compute (`softkmeans.sources.readahead`; their statistics merged in block order), and
    its rows with annealing's zero column copied a block at a time, not as a whole:
    below that size the copy (n x (d + 1)) is made once, as for an in-memory X; in
    blocks, each block is a native call, whose thread team costs milliseconds on a busy
    machine (at load 12 on 2 cores, 25 calls of (16k, 65, 3) softmax took 1.1 s, one
    call of all 400k rows 0.18 s).

    fit: the source of a fit: validated in blocks with the features' moments folded into
    that pass (the tolerance). release: what frees the temporary file behind X (`spool`'s),
    called once, by close, or when the source is collected unclosed (a KeyboardInterrupt
    between its creation and the caller's ``try``), or at exit.
    """

    def __init__(self, X, sample_weight=None, *, n_threads=0, name="X", fit=False,
                 release=None, checked=False):  # fmt: skip
        X = v.as_float_array(X, name, ndim=2, check_values=False)
        super().__init__(X.shape, sample_weight, n_threads, fit)
        self.data, self.dtype = X, X.dtype
        w = self.weights
        self._release = None if release is None else weakref.finalize(self, release)
        self._transformed = None
        if checked:  # by `spool`, as it wrote X
            return
        self.variances = check_values(((0, X.shape[0], X),), w, name, fit, n_threads=n_threads)

    def blocks(self):
        # A memory-mapped file over MIN_FILE_BYTES: its blocks read ahead (asked here, by
        # the pass that reads them: making a source of an in-memory X asks nothing).
        ahead = file_blocks(self.data)
        if ahead is not None:
            ahead.on_block = self.on_block
            yield from ahead
            return
        if self.transforms and file_backed(self.data):
            # A transformed block is anonymous memory: bounded for a file (cosine of a
            # memmap stays out of core), whole for an in-memory X (the kernels' bits).
            n = self.data.shape[0]
            step = max(1, TRANSFORMED_BLOCK_BYTES // (self.data.shape[1] * self.data.itemsize))
            for start in range(0, n, step):
                yield start, min(start + step, n), self.data[start : start + step]
            return
        yield 0, self.shape[0], self.data

    def dense_array(self):
        """X, in place; with transforms, X transformed once in memory where X is in
        memory (not for a memory-mapped file: its fit reads it by passes)."""
        if not self.transforms:
            return self.data
        if file_backed(self.data):
            return None
        if self._transformed is None:
            self._transformed = np.ascontiguousarray(transformed(self.data, self.transforms))
        return self._transformed

    def _raw_rows(self, idx):
        return self.data[np.asarray(idx, dtype=np.int64)]

    def close(self):
        """Free the temporary file behind X, if this source owns one."""
        if self._release is not None:
            self.data = None
            self._transformed = None
            self._release, release = None, self._release
            release()


def _close_quietly(fd):
    try:
        os.close(fd)
    except OSError:  # closed already
        pass


def _remove_if_present(path):
    try:
        os.unlink(path)
    except FileNotFoundError:  # removed already (spool's own clean-up)
        pass


def _close_and_remove(fd, path):
    _close_quietly(fd)
    _remove_if_present(path)


def _unlinked(out, fd, path):
    """A release for the memmap `out` of the temporary file `path` (open as fd): the file
    is unlinked at once, so that no kill (SIGKILL, SIGTERM without a handler) leaves it
    in TMPDIR; the mapping keeps its pages, and the descriptor keeps the read-ahead's
    path (/proc/self/fd/N) while the source lives. Where an open file cannot be unlinked
    (Windows), it is removed when released."""
    try:
        os.unlink(path)
    except OSError:
        os.close(fd)
        return functools.partial(_remove_if_present, path)
    proc_path = f"/proc/self/fd/{fd}"
    out.filename = proc_path if os.path.exists(proc_path) else None
    return functools.partial(_close_quietly, fd)


def file_backed(a):
    """True when array a views a memory-mapped file (an np.memmap, or a view of one)."""
    while a is not None:
        if isinstance(a, (np.memmap, mmap.mmap)):
            return True
        a = getattr(a, "base", None)
    return False


class RowBlockSource(_DenseSource):
    """X read in bounded row blocks copied into one reused C-contiguous buffer: a
    float32/float64 array that is not C-contiguous, or a row-sliceable array-like.

    Results: with X of at most one block, those of the C-ordered copy bit for bit; beyond
    that, up to the rounding of the block sums (float64: ~1e-15 relative), with the same
    labels except at exact ties.
    """

    def __init__(self, X, sample_weight=None, *, n_threads=0, name="X", fit=False, checked=False):
        shape = tuple(int(s) for s in X.shape)
        if len(shape) != 2:
            raise ValueError(f"{name} must be 2-dimensional; got shape {shape}")
        if 0 in shape:
            raise ValueError(f"{name} must not be empty; got shape {shape}")
        dtype = np.dtype(X.dtype)
        v.check_real_dtype(dtype, name)
        super().__init__(shape, sample_weight, n_threads, fit)
        self.data, self.dtype = X, v.float_dtype_of(dtype)
        w = self.weights
        if checked:  # by `spool`, as it copies X
            return
        self.variances = check_values(self.blocks(), w, name, fit, n_threads=n_threads)

    def block_rows(self):
        n, d = self.data.shape
        rows = max(1, min(n, ROW_BLOCK_BYTES // (d * self.dtype.itemsize)))
        return rows if self._in_memory() else min(rows, ARRAY_LIKE_ROWS)

    def blocks(self):
        """Blocks in one reused buffer."""
        return copied_blocks(self.data, self.block_rows(), self.dtype)

    def _raw_rows(self, idx):
        idx = np.asarray(idx, dtype=np.int64)
        if self._in_memory():
            return np.ascontiguousarray(self.data[idx], dtype=self.dtype)
        out = np.empty((idx.size, self.shape[1]), dtype=self.dtype)
        for t, i in enumerate(idx):  # h5py takes no unsorted fancy index
            out[t] = self.data[int(i)]
        return out


def copied_blocks(X, step, dtype):
    """(start, stop, rows) of X (n, d), `step` rows at a time copied into one reused
    C-contiguous buffer of `dtype`."""
    n, d = X.shape
    buf = np.zeros((step, d), dtype=dtype)
    for start in range(0, n, step):
        stop = min(start + step, n)
        np.copyto(buf[: stop - start], X[start:stop], casting="unsafe")
        yield start, stop, buf[: stop - start]


def spool(X, sample_weight=None, *, n_threads=0, name="X", directory=None):
    """An `ArraySource` over a temporary file-backed copy of the row-sliceable X (its
    `close` removes the file), written and validated block by block in one read of X: a
    fit's many passes then read the page cache, not the array-like."""
    blocks = RowBlockSource(X, sample_weight, n_threads=n_threads, name=name, checked=True)
    fd, path = tempfile.mkstemp(suffix=".softkmeans", dir=directory)
    release = functools.partial(_close_and_remove, fd, path)
    try:  # from here on a KeyboardInterrupt removes the file
        out = np.memmap(path, dtype=blocks.dtype, mode="w+", shape=blocks.shape)
        release = _unlinked(out, fd, path)

        def written():
            for start, stop, rows in blocks.blocks():
                out[start:stop] = rows
                yield start, stop, rows

        variances = check_values(written(), blocks.weights, name, fit=True, n_threads=n_threads)
        out.flush()
        source = ArraySource(
            out, sample_weight, n_threads=n_threads, name=name, release=release, checked=True
        )
    except BaseException:
        release()
        raise
    source.variances = variances
    return source
