"""Input validation shared by the native API, the reference and the estimator.

Every public entry point funnels its arguments through these helpers so that
both backends accept exactly the same inputs and raise exactly the same errors.
"""

from __future__ import annotations

import numbers

import numpy as np

KINDS = ("hard", "softmax", "entmax15")

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def magnitude_limit(dtype, d: int) -> float:
    """Largest |coordinate| for which every squared distance fits in `dtype`.

    With |x_l|, |c_l| <= B, ||x - c||^2 <= d (2 B)^2, so B = sqrt(max / (4 d)).
    For float64 this is ~1e154 / sqrt(d) (never reached by real data); for float32
    ~9e18 / sqrt(d).
    """
    return float(np.sqrt(np.finfo(dtype).max / (4.0 * max(d, 1))))


def as_float_array(
    a,
    name: str,
    *,
    ndim: int,
    dtype=None,
    allow_empty: bool = False,
    magnitude: bool = False,
    check_values: bool = True,
):
    """Return `a` as a C-contiguous float32/float64 array, copying only if needed.

    float32 and float64 are kept as they are (unless `dtype` asks otherwise; byte-swapped
    float32/float64 become native); every dtype that numpy casts to float64 losslessly
    (``np.can_cast(dtype, float64, "safe")``: bool, integers, float16) is converted to
    float64; anything else (object, complex, long double, datetime, strings) raises
    TypeError naming the argument. NaN or infinity raise ValueError. With `magnitude`,
    values so large that squared distances would overflow the dtype raise ValueError.

    Finiteness and magnitude come from one min and one max reduction (NaN propagates
    through both): two passes without temporaries, cheaper than np.isfinite(arr).all().
    check_values=False: neither (the caller checks the values, e.g. in row blocks).
    """
    if isinstance(a, np.ndarray):
        arr = a
    else:
        try:
            arr = np.asarray(a)
        except Exception as exc:  # ragged lists and the like
            raise TypeError(f"{name} could not be converted to a numeric array: {exc}") from exc
    check_real_dtype(arr.dtype, name)
    if dtype is None:
        dtype = float_dtype_of(arr.dtype)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional; got shape {arr.shape}")
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name} must not be empty; got shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=dtype)
    if arr.size == 0 or not check_values:
        return arr
    lo, hi = float(arr.min()), float(arr.max())
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"{name} contains NaN or infinity")
    if magnitude:
        check_magnitude(arr, name, max(hi, -lo))
    return arr


def check_real_dtype(dtype, name: str):
    """TypeError unless `dtype` is float32/float64 or converts to float64 without loss."""
    if not np.can_cast(dtype, np.float64, casting="safe") or dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must be a real numeric array (float32 or float64, or a type that converts "
            f"to float64 without loss: bool, integer, float16); got dtype {dtype}"
        )


def float_dtype_of(dtype):
    """The float dtype data of `dtype` is computed in: float32 stays, all else float64."""
    # NOTE: the canonical dtype objects, not dtype.newbyteorder("="): the binding tells
    # float32 from float64 by dtype identity (pybind11 dtype::is).
    native = dtype.newbyteorder("=")
    return next((f for f in _FLOATS if f == native), np.dtype(np.float64))


def check_magnitude(arr, name: str, big: float, d: int | None = None):
    """Refuse finite values so large that squared distances would overflow arr's dtype
    (d: the number of columns, when arr holds stored entries of a sparse matrix)."""
    d = arr.shape[-1] if d is None else d
    limit = magnitude_limit(arr.dtype, d)
    if big > limit:
        raise ValueError(
            f"{name} has values up to {big:.3g} in magnitude; squared distances would overflow "
            f"{arr.dtype} (limit {limit:.3g} for d={d}); rescale the data"
            + (" or use float64" if arr.dtype == np.float32 else "")
        )
    return arr


def check_spread(variances, dtype, name: str = "X"):
    """Refuse data whose spread is so small that squared distances underflow its dtype:
    a positive total variance V (sum of the features' variances, about half the mean
    squared distance) below tiny / eps (float32 9.9e-32, float64 1e-292), where squared
    distances a factor eps below V leave the normal numbers and every point looks like
    its neighbours (V = 0, every point the same, is accepted: those are duplicates)."""
    dtype = np.dtype(dtype)
    total = float(np.sum(variances, dtype=np.float64))
    limit = float(np.finfo(dtype).tiny / np.finfo(dtype).eps)
    if 0.0 < total < limit:
        raise ValueError(
            f"{name} has a total variance of {total:.3g}; squared distances would underflow "
            f"{dtype} (the spread must be at least {limit:.3g}); rescale the data"
            + (" or use float64" if dtype == np.float32 else "")
        )


def check_data(X, name: str = "X"):
    """A dense X: (n, d) with n >= 1 and d >= 1, finite, float32 or float64 (any data
    is checked by the source that reads it: `softkmeans.sources.source_of`)."""
    return as_float_array(X, name, ndim=2, magnitude=True)


def check_centroids(C, X, name: str = "C"):
    """C: (k, d) with the same d and the same dtype as X (converted if needed)."""
    C = as_float_array(C, name, ndim=2, dtype=X.dtype, magnitude=True)
    if C.shape[1] != X.shape[1]:
        raise ValueError(
            f"{name} has {C.shape[1]} features but X has {X.shape[1]}; they must match"
        )
    return C


def check_kind(kind) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    return kind


def check_sigma(sigma, kind: str) -> float:
    """sigma > 0 and finite; required for softmax and entmax15, ignored for hard.

    A Python/NumPy real scalar or a 0-d real array. sigma so large that the temperature
    2 sigma^2 overflows float64 (sigma > ~9e153) is refused: the objectives would be
    -inf.
    """
    if kind == "hard":
        return 0.0
    if sigma is None:
        raise ValueError(f"sigma is required for kind={kind!r}")
    sigma = check_real(sigma, "sigma", minimum=0.0, strict=True)
    if not np.isfinite(2.0 * sigma * sigma):
        raise ValueError(f"sigma is too large: the temperature 2 sigma^2 overflows; got {sigma}")
    return sigma


def check_real(value, name: str, *, minimum=None, strict: bool = False) -> float:
    """A finite real number (a Python/NumPy real scalar or a 0-d real array; bool refused),
    >= minimum (> minimum with strict). TypeError for a non-number, ValueError otherwise."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (numbers.Real, np.generic))
        or (isinstance(value, np.generic) and value.dtype.kind not in "iuf")
    ):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    value = float(value)
    too_small = minimum is not None and (value <= minimum if strict else value < minimum)
    if not np.isfinite(value) or too_small:
        bound = "" if minimum is None else f" and {'>' if strict else '>='} {minimum:g}"
        raise ValueError(f"{name} must be finite{bound}; got {value}")
    return value


def check_int(value, name: str, minimum: int = 1, *, allow_none: bool = False):
    """An int (Python or NumPy; bool refused) >= minimum, or None when allow_none."""
    if value is None and allow_none:
        return None
    either = "None or " if allow_none else ""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be {either}an int; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be {either}>= {minimum}; got {value}")
    return int(value)


def check_sample_weight(sample_weight, n: int, dtype=np.float64):
    """None (all ones) or an (n,) array of finite weights >= 0 with a positive, finite sum.

    Returns a C-contiguous float64 array (weights are accumulated in double).
    """
    if sample_weight is None:
        return np.ones(n, dtype=np.float64)
    w = as_float_array(sample_weight, "sample_weight", ndim=1, dtype=np.float64, allow_empty=True)
    if w.shape[0] != n:
        raise ValueError(f"sample_weight has {w.shape[0]} entries but X has {n} rows")
    if (w < 0).any():
        raise ValueError("sample_weight must be non-negative")
    with np.errstate(over="ignore"):
        total = w.sum()
    if not total > 0:
        raise ValueError("sample_weight must have a positive sum")
    if not np.isfinite(total):
        raise ValueError("sample_weight must have a finite sum; rescale the weights")
    return w


def check_n_threads(n_threads) -> int:
    """None -> 0 (the OpenMP default); otherwise a positive integer."""
    return check_int(n_threads, "n_threads", 1, allow_none=True) or 0


def check_scores(Z, name: str = "Z"):
    """Z: (n, k) finite scores, float32 or float64."""
    return as_float_array(Z, name, ndim=2)
