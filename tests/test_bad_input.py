"""Bad input battery over every public function, in both backends.

Each class of bad input gets either a clear exception that names the argument, or a
documented correct result (computed here by hand, never copied from the code):

- NaN / Inf in X, C, Z, sample_weight, sigma               -> ValueError naming it
- sigma <= 0, sigma None for softmax/entmax15               -> ValueError "sigma"
- sigma not a real number (str, complex, bool, 1-d array)   -> TypeError "sigma"
- sigma so large that 2 sigma^2 overflows                   -> ValueError "sigma is too large"
- sigma with kind="hard"                                    -> ignored (SPEC.md)
- wrong ndim of X, C, Z, sample_weight     -> ValueError "<name> must be N-dimensional"
- mismatched d                                              -> ValueError "C has .. features"
- n = 0, d = 0, k = 0                                       -> ValueError "<name> must not be empty"
- wrong number of weights, negative, all-zero, overflowing -> ValueError "sample_weight ..."
- bool, int, uint, float16 arrays, lists                    -> converted to float64, same result
- object, complex, long double, datetime, str arrays        -> TypeError naming the argument
- values whose squared distances overflow the dtype         -> ValueError "rescale the data"
- non-contiguous, Fortran, negatively strided, read-only,
  byte-swapped arrays                                       -> the contiguous array's result
- k > n                       -> allowed: a step leaves >= k - n clusters empty (kept, flagged)
- k = 1                       -> margins: ValueError "at least 2 centroids"; min_margin = inf
- k = n, all points identical (Delta_min = 0), duplicate centroids -> exact results below
- unknown kind, bad n_threads                               -> ValueError / TypeError naming it

SoftKMeans: scikit-learn's validate_data messages for X (NaN, infinity, ndim, n = 0,
d = 0, complex), softkmeans._validation's for sigma, sample_weight and magnitudes;
k > n_samples -> ValueError; all points identical -> a UserWarning and every centre at the
point. Strings and long double are refused with the functional API's TypeError; object
arrays of numbers are accepted (scikit-learn's convention, check_dtype_object), object arrays
holding anything else fail in scikit-learn's conversion.

The reference and the native backend must raise the same exception type (and, since
both use softkmeans._validation, the same message) for the same bad input.
"""

from __future__ import annotations

import numpy as np
import pytest

import softkmeans
from conftest import API_CALLS, assert_identical
from softkmeans import SoftKMeans, _validation, reference

BACKENDS = {"native": softkmeans, "reference": reference}
KINDS = ("hard", "softmax", "entmax15")

# Functions of (X, C); SIGMA_FUNCS and WEIGHT_FUNCS take sigma and kind, and weights too.
XC_FUNCS = {name: f for name, f in API_CALLS.items() if name not in ("entmax15", "critical_sigma")}
SIGMA_FUNCS = ("responsibilities", "objective", "centroid_step", "gradients")
WEIGHT_FUNCS = ("objective", "centroid_step", "gradients")

RNG = np.random.default_rng(0)
X0 = RNG.normal(size=(9, 3))
C0 = X0[[0, 4, 7]] + 0.1
W0 = RNG.uniform(0.5, 2.0, size=9)
SIGMA0 = 0.8


def _backend_params():
    return pytest.mark.parametrize("backend", list(BACKENDS))


def _raises_same(calls, exc, match):
    """Every call raises `exc` matching `match`; all backends raise the same type."""
    types = set()
    for call in calls:
        with pytest.raises(exc, match=match) as info:
            call()
        types.add(type(info.value))
    assert len(types) == 1, f"backends raise different exception types: {types}"


def _all_backends(fname, X, C, s, kind, w):
    f = XC_FUNCS[fname]
    return [lambda api=api: f(api, X, C, s, kind, w) for api in BACKENDS.values()]


# ---------------------------------------------------------------------------------------
# Exceptions that name the argument
# ---------------------------------------------------------------------------------------

NAN_X = X0.copy()
NAN_X[2, 1] = np.nan
INF_X = X0.copy()
INF_X[0, 0] = -np.inf
NAN_C = C0.copy()
NAN_C[1, 2] = np.nan
INF_C = C0.copy()
INF_C[2, 0] = np.inf

XC_BAD = [
    ("nan-X", NAN_X, C0, ValueError, "X contains NaN or infinity"),
    ("inf-X", INF_X, C0, ValueError, "X contains NaN or infinity"),
    ("nan-C", X0, NAN_C, ValueError, "C contains NaN or infinity"),
    ("inf-C", X0, INF_C, ValueError, "C contains NaN or infinity"),
    ("X-1d", X0[0], C0, ValueError, "X must be 2-dimensional"),
    ("X-3d", X0[None], C0, ValueError, "X must be 2-dimensional"),
    ("X-0d", np.float64(1.0), C0, ValueError, "X must be 2-dimensional"),
    ("C-1d", X0, C0[0], ValueError, "C must be 2-dimensional"),
    ("C-3d", X0, C0[None], ValueError, "C must be 2-dimensional"),
    ("d-mismatch", X0, C0[:, :2], ValueError, "C has 2 features but X has 3"),
    ("d-mismatch-wider", X0, np.ones((3, 5)), ValueError, "C has 5 features but X has 3"),
    ("n=0", np.empty((0, 3)), C0, ValueError, "X must not be empty"),
    ("d=0", np.empty((9, 0)), np.empty((3, 0)), ValueError, "X must not be empty"),
    ("k=0", X0, np.empty((0, 3)), ValueError, "C must not be empty"),
    ("X-object", X0.astype(object), C0, TypeError, "X must be a real numeric array"),
    ("C-object", X0, C0.astype(object), TypeError, "C must be a real numeric array"),
    ("X-complex", X0.astype(complex), C0, TypeError, "X must be a real numeric array"),
    ("X-longdouble", X0.astype(np.longdouble), C0, TypeError, "X must be a real numeric array"),
    ("C-longdouble", X0, C0.astype(np.longdouble), TypeError, "C must be a real numeric array"),
    ("X-str", X0.astype(str), C0, TypeError, "X must be a real numeric array"),
    ("X-str-letters", np.array([["a", "b", "c"]]), C0, TypeError, "X must be a real numeric array"),
    ("X-datetime", np.zeros((9, 3), "M8[s]"), C0, TypeError, "X must be a real numeric array"),
    ("X-ragged", [[1.0, 2.0, 3.0], [1.0]], C0, TypeError, "X could not be converted"),
    ("X-none", None, C0, TypeError, "X must be a real numeric array"),
    ("X-overflow64", X0 * 1e160, C0, ValueError, "X has values up to .* rescale the data"),
    ("C-overflow64", X0, C0 * 1e160, ValueError, "C has values up to .* rescale the data"),
    (
        "X-overflow32",
        (X0 * 1e20).astype(np.float32),
        C0,
        ValueError,
        "X has values up to .* overflow float32",
    ),
    # C follows X's dtype: C at 1e20 overflows when X is float32.
    ("C-overflow32", X0.astype(np.float32), C0 * 1e20, ValueError, "C has values up to"),
]


@pytest.mark.parametrize("fname", list(XC_FUNCS))
@pytest.mark.parametrize(
    ("Xb", "Cb", "exc", "match"), [p[1:] for p in XC_BAD], ids=[p[0] for p in XC_BAD]
)
def test_bad_X_or_C(fname, Xb, Cb, exc, match):
    kinds = KINDS if fname in SIGMA_FUNCS else ("softmax",)
    for kind in kinds:
        _raises_same(_all_backends(fname, Xb, Cb, SIGMA0, kind, None), exc, match)


@pytest.mark.parametrize("fname", SIGMA_FUNCS)
@pytest.mark.parametrize("kind", ["softmax", "entmax15"])
@pytest.mark.parametrize(
    ("sigma", "exc", "match"),
    [
        (np.nan, ValueError, "sigma must be finite and > 0"),
        (np.inf, ValueError, "sigma must be finite and > 0"),
        (-np.inf, ValueError, "sigma must be finite and > 0"),
        (0.0, ValueError, "sigma must be finite and > 0"),
        (-0.0, ValueError, "sigma must be finite and > 0"),
        (-1.0, ValueError, "sigma must be finite and > 0"),
        (np.float32(-1e-30), ValueError, "sigma must be finite and > 0"),
        (1e160, ValueError, "sigma is too large"),
        (None, ValueError, "sigma is required"),
        ("1.0", TypeError, "sigma must be a real number"),
        (1 + 0j, TypeError, "sigma must be a real number"),
        (True, TypeError, "sigma must be a real number"),
        (np.array([1.0]), TypeError, "sigma must be a real number"),
        (np.complex128(1.0), TypeError, "sigma must be a real number"),
    ],
    ids=repr,
)
def test_bad_sigma(fname, kind, sigma, exc, match):
    _raises_same(_all_backends(fname, X0, C0, sigma, kind, None), exc, match)


# (kind, sigma, sigmas that give the same result): for softmax and entmax15 any real scalar
# equals the Python float; kind="hard" ignores sigma, whatever it is.
SIGMA_SAME = [
    *[
        (kind, 2.0, (np.float32(2.0), np.float64(2.0), np.array(2.0), 2, np.int16(2)))
        for kind in ("softmax", "entmax15")
    ],
    ("hard", None, (1.0, -1.0, 0.0, np.nan)),
]


@pytest.mark.parametrize("fname", SIGMA_FUNCS)
@pytest.mark.parametrize(("kind", "sigma", "same"), SIGMA_SAME, ids=[p[0] for p in SIGMA_SAME])
@_backend_params()
def test_sigma_forms_that_give_the_same_result(fname, kind, sigma, same, backend):
    f, api = XC_FUNCS[fname], BACKENDS[backend]
    expected = f(api, X0, C0, sigma, kind, None)
    for s in same:
        assert_identical(f(api, X0, C0, s, kind, None), expected, f"{fname} {kind} sigma={s!r}")


def _weights_with(value):
    w = W0.copy()
    w[3] = value
    return w


WEIGHT_BAD = [
    ("nan", _weights_with(np.nan), ValueError, "sample_weight contains NaN or infinity"),
    ("inf", _weights_with(np.inf), ValueError, "sample_weight contains NaN or infinity"),
    ("negative", _weights_with(-1e-300), ValueError, "sample_weight must be non-negative"),
    ("all-zero", np.zeros(9), ValueError, "sample_weight must have a positive sum"),
    ("sum-overflows", np.full(9, 1e308), ValueError, "sample_weight must have a finite sum"),
    ("too-short", W0[:8], ValueError, "sample_weight has 8 entries but X has 9 rows"),
    ("too-long", np.ones(10), ValueError, "sample_weight has 10 entries but X has 9 rows"),
    ("2d", W0[:, None], ValueError, "sample_weight must be 1-dimensional"),
    ("scalar", 1.0, ValueError, "sample_weight must be 1-dimensional"),
    ("object", W0.astype(object), TypeError, "sample_weight must be a real numeric array"),
    ("complex", W0.astype(complex), TypeError, "sample_weight must be a real numeric array"),
    ("longdouble", W0.astype(np.longdouble), TypeError, "sample_weight must be a real numeric"),
    ("str", W0.astype(str), TypeError, "sample_weight must be a real numeric array"),
    ("datetime", np.zeros(9, "M8[s]"), TypeError, "sample_weight must be a real numeric array"),
    ("ragged", [[1.0], [1.0, 2.0]], TypeError, "sample_weight could not be converted"),
]


@pytest.mark.parametrize("fname", [*WEIGHT_FUNCS, "critical_sigma"])
@pytest.mark.parametrize(
    ("w", "exc", "match"), [p[1:] for p in WEIGHT_BAD], ids=[p[0] for p in WEIGHT_BAD]
)
def test_bad_sample_weight(fname, w, exc, match):
    if fname == "critical_sigma":
        calls = [
            lambda api=api: api.critical_sigma(X0, sample_weight=w) for api in BACKENDS.values()
        ]
        _raises_same(calls, exc, match)
        return
    for kind in KINDS:
        _raises_same(_all_backends(fname, X0, C0, SIGMA0, kind, w), exc, match)


# critical_sigma takes X alone: every row of XC_BAD whose C is good, and d = 0.
X_BAD = [(name, Xb, exc, match) for name, Xb, Cb, exc, match in XC_BAD if Cb is C0]
X_BAD.append(("d=0", np.empty((4, 0)), ValueError, "X must not be empty"))


@pytest.mark.parametrize(("Xb", "exc", "match"), [p[1:] for p in X_BAD], ids=[p[0] for p in X_BAD])
def test_bad_critical_sigma(Xb, exc, match):
    calls = [lambda api=api: api.critical_sigma(Xb) for api in BACKENDS.values()]
    _raises_same(calls, exc, match)


@pytest.mark.parametrize(
    ("Z", "exc", "match"),
    [
        (np.array([[0.0, np.nan]]), ValueError, "Z contains NaN or infinity"),
        (np.array([[0.0, -np.inf]]), ValueError, "Z contains NaN or infinity"),
        (np.zeros(3), ValueError, "Z must be 2-dimensional"),
        (np.zeros((2, 2, 2)), ValueError, "Z must be 2-dimensional"),
        (np.empty((0, 3)), ValueError, "Z must not be empty"),
        (np.empty((3, 0)), ValueError, "Z must not be empty"),
        (np.zeros((2, 2), dtype=object), TypeError, "Z must be a real numeric array"),
        (np.zeros((2, 2), dtype=np.complex64), TypeError, "Z must be a real numeric array"),
        (np.zeros((2, 2), dtype=np.longdouble), TypeError, "Z must be a real numeric array"),
        (np.zeros((2, 2)).astype(str), TypeError, "Z must be a real numeric array"),
        (np.zeros((2, 2), "M8[s]"), TypeError, "Z must be a real numeric array"),
        ([[0.0, 1.0], [0.0]], TypeError, "Z could not be converted"),
        (None, TypeError, "Z must be a real numeric array"),
    ],
    ids=repr,
)
def test_bad_entmax15_scores(Z, exc, match):
    calls = [lambda api=api: api.entmax15(Z) for api in BACKENDS.values()]
    _raises_same(calls, exc, match)


@pytest.mark.parametrize("fname", SIGMA_FUNCS)
@pytest.mark.parametrize("kind", ["soft", "Hard", None, 1, "entmax"])
def test_bad_kind(fname, kind):
    _raises_same(_all_backends(fname, X0, C0, SIGMA0, kind, None), ValueError, "kind must be")


@pytest.mark.parametrize("fname", list(XC_FUNCS))
@pytest.mark.parametrize("n_threads", [0, -1, 1.5, "2", True, np.float64(2.0)], ids=repr)
def test_bad_n_threads(fname, n_threads):
    f = XC_FUNCS[fname]
    calls = [
        lambda api=api: f(api_with_threads(api, n_threads), X0, C0, SIGMA0, "softmax", None)
        for api in BACKENDS.values()
    ]
    _raises_same(calls, (TypeError, ValueError), "n_threads")


class api_with_threads:  # noqa: N801 - a tiny adapter used like a module
    """Forwards every call to `api` with n_threads set."""

    def __init__(self, api, n_threads):
        self._api, self._n = api, n_threads

    def __getattr__(self, name):
        f = getattr(self._api, name)
        return lambda *a, **kw: f(*a, n_threads=self._n, **kw)


def test_margins_need_two_centroids():
    calls = [lambda api=api: api.margins(X0, C0[:1]) for api in BACKENDS.values()]
    _raises_same(calls, ValueError, "at least 2 centroids")


# ---------------------------------------------------------------------------------------
# Conversions: lossless ones give the float64 result, layouts give the contiguous result
# ---------------------------------------------------------------------------------------

XI = np.array([[0, 1], [2, 3], [4, 4], [9, 1], [3, 7], [8, 8]], dtype=np.int64)
CI = np.array([[1, 1], [8, 2], [4, 6]], dtype=np.int64)
WI = np.array([1, 2, 1, 3, 1, 2], dtype=np.int64)


def _call_all(api, X, C, w=None, s=1.3):
    """Every function of (X, C) in every kind, plus critical_sigma."""
    out = []
    for fname, f in XC_FUNCS.items():
        for kind in KINDS if fname in SIGMA_FUNCS else ("softmax",):
            out.append((f"{fname}-{kind}", f(api, X, C, s, kind, w)))
    out.append(("critical_sigma", api.critical_sigma(X, sample_weight=w)))
    return out


def _assert_all_identical(got, expected):
    for (name, a), (_, b) in zip(got, expected):
        assert_identical(a, b, name)


def _same_conversion(conv):
    return lambda: (conv(XI), conv(CI), conv(WI))


# (X, C, sample_weight) in lossless forms. "each-its-own": X, C and sample_weight of
# different dtypes each convert to float64 on their own.
LOSSLESS = {
    "int32": _same_conversion(lambda a: a.astype(np.int32)),
    "uint8": _same_conversion(lambda a: a.astype(np.uint8)),
    "uint64": _same_conversion(lambda a: a.astype(np.uint64)),
    "int16": _same_conversion(lambda a: a.astype(np.int16)),
    "float16": _same_conversion(lambda a: a.astype(np.float16)),
    "list": _same_conversion(lambda a: a.tolist()),
    "float64-bigendian": _same_conversion(lambda a: a.astype(">f8")),
    "int32-be": _same_conversion(lambda a: a.astype(">i4")),
    "each-its-own": lambda: (XI.astype(np.int32), CI.astype(np.int64), WI.astype(np.uint8)),
    "bool": lambda: (XI > 3, CI > 3, np.array([True, False, True, True, False, True])),
}


@_backend_params()
@pytest.mark.parametrize("form", list(LOSSLESS))
def test_lossless_conversions_equal_float64(backend, form):
    """Every function gives the result of the same values as float64 arrays."""
    api = BACKENDS[backend]
    X, C, w = LOSSLESS[form]()
    expected = _call_all(api, *(np.asarray(a).astype(np.float64) for a in (X, C, w)))
    _assert_all_identical(_call_all(api, X, C, w), expected)


@_backend_params()
def test_dtypes_of_outputs(backend):
    """float32 stays float32 (C is cast to X's dtype), float64 and converted types give float64."""
    api = BACKENDS[backend]
    for Xd, Cd, expected in [
        (np.float32, np.float64, np.float32),
        (np.float32, np.int64, np.float32),
        (">f4", np.float32, np.float32),
        (np.float64, np.float32, np.float64),
        (np.int64, np.float32, np.float64),
        (np.float16, np.float16, np.float64),
    ]:
        D = api.sq_distances(XI.astype(Xd), CI.astype(Cd))
        assert D.dtype == expected, (Xd, Cd, D.dtype)
        step = api.centroid_step(XI.astype(Xd), CI.astype(Cd), 1.0)
        assert step.centroids.dtype == expected
        assert step.cluster_weights.dtype == np.float64
        assert step.empty.dtype == np.bool_
        labels, mind = api.assign(XI.astype(Xd), CI.astype(Cd))
        assert labels.dtype == np.int64 and mind.dtype == expected


def _layouts(a):
    """The same values as `a` in layouts that are not C-contiguous (or not writeable)."""
    big = np.zeros((a.shape[0] * 2, a.shape[1] * 3), dtype=a.dtype)
    big[::2, ::3] = a
    rev = np.ascontiguousarray(a[::-1, ::-1])[::-1, ::-1]
    ro = a.copy()
    ro.flags.writeable = False
    return {
        "strided": big[::2, ::3],
        "fortran": np.asfortranarray(a),
        "negative-strides": rev,
        "reversed-rows": np.ascontiguousarray(a[::-1])[::-1],
        "read-only": ro,
        "transposed-view": np.ascontiguousarray(a.T).T,
    }


@_backend_params()
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "layout",
    ["strided", "fortran", "negative-strides", "reversed-rows", "read-only", "transposed-view"],
)
def test_layouts_give_the_contiguous_result(backend, dtype, layout):
    api = BACKENDS[backend]
    X, C = XI.astype(dtype) / 3, CI.astype(dtype) / 3
    w = WI.astype(np.float64)
    wl = np.zeros(2 * len(w))
    wl[::2] = w
    expected = _call_all(api, X, C, w)
    Xl, Cl = _layouts(X)[layout], _layouts(C)[layout]
    assert not (Xl.flags.c_contiguous and Xl.flags.writeable)
    _assert_all_identical(_call_all(api, Xl, Cl, wl[::2]), expected)
    if dtype == np.float64:  # Z through entmax15
        Z = -api.sq_distances(X, C)
        assert_identical(api.entmax15(_layouts(Z)[layout]), api.entmax15(Z), "entmax15")


@_backend_params()
def test_read_only_inputs_are_not_modified(backend):
    api = BACKENDS[backend]
    X, C, w = XI.astype(float), CI.astype(float), WI.astype(float)
    for a in (X, C, w):
        a.flags.writeable = False
    before = [X.copy(), C.copy(), w.copy()]
    _call_all(api, X, C, w)
    for a, b in zip((X, C, w), before):
        np.testing.assert_array_equal(a, b)


@_backend_params()
def test_broadcast_zero_stride_inputs(backend):
    """A view with stride 0 (np.broadcast_to) works and equals its materialized copy."""
    api = BACKENDS[backend]
    X = np.broadcast_to(np.array([1.0, 2.0]), (5, 2))
    C = np.array([[0.0, 0.0], [1.0, 2.5]])
    _assert_all_identical(_call_all(api, X, C), _call_all(api, X.copy(), C))


def test_no_copy_when_already_valid():
    for dtype in (np.float32, np.float64):
        a = np.ones((4, 3), dtype=dtype)
        assert _validation.check_data(a) is a
        assert _validation.check_centroids(a, a) is a
        Z = np.zeros((4, 3), dtype=dtype)
        assert _validation.check_scores(Z) is Z
    w = np.ones(4)
    assert _validation.check_sample_weight(w, 4) is w


def test_validated_arrays_are_c_contiguous_and_canonical():
    """The binding dispatches on dtype identity: byte-swapped input must come out canonical."""
    for src, expected in [(">f4", np.float32), (">f8", np.float64), ("<f4", np.float32)]:
        a = _validation.check_data(np.ones((3, 2), dtype=src))
        assert a.dtype is np.dtype(expected) and a.flags.c_contiguous


# ---------------------------------------------------------------------------------------
# Degenerate but valid problems: documented results, computed by hand
# ---------------------------------------------------------------------------------------


@_backend_params()
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_k_greater_than_n_leaves_clusters_empty(backend, dtype):
    """k > n is a valid step: points pick their nearest centroids, the others are empty."""
    api = BACKENDS[backend]
    X = np.array([[0.0], [10.0]], dtype=dtype)
    C = np.array([[0.0], [1.0], [9.0], [10.0], [20.0]], dtype=dtype)
    step = api.centroid_step(X, C, kind="hard")
    np.testing.assert_array_equal(step.empty, [False, True, True, False, True])
    np.testing.assert_array_equal(step.cluster_weights, [1, 0, 0, 1, 0])
    np.testing.assert_array_equal(step.centroids, C)  # the occupied ones are already at the mean
    assert step.distortion == 0.0 and step.objective == 0.0
    assert step.min_margin == 1.0  # both points: next centroid at distance 1
    labels, mind = api.assign(X, C)
    np.testing.assert_array_equal(labels, [0, 3])
    # entmax15 at small sigma: one-hot, identical to hard (Delta = 1 >= 4 sigma^2).
    step_e = api.centroid_step(X, C, 0.1, kind="entmax15")
    np.testing.assert_array_equal(step_e.empty, step.empty)
    # softmax at a moderate sigma: every cluster gets some mass, none empty, N sums to W = 2.
    step_s = api.centroid_step(X, C, 3.0, kind="softmax")
    assert not step_s.empty.any()
    assert abs(step_s.cluster_weights.sum() - 2.0) < 1e-6
    r = api.responsibilities(X, C, 3.0, kind="softmax")
    assert r.shape == (2, 5)


@_backend_params()
def test_k_equal_n(backend):
    api = BACKENDS[backend]
    X = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0]])
    C = X.copy()
    labels, mind = api.assign(X, C)
    np.testing.assert_array_equal(labels, [0, 1, 2])
    np.testing.assert_array_equal(mind, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(api.margins(X, C), [9.0, 9.0, 16.0])
    step = api.centroid_step(X, C, kind="hard")
    np.testing.assert_array_equal(step.centroids, X)
    assert not step.empty.any() and step.objective == 0.0 and step.min_margin == 9.0
    # entmax15 below the exact-recovery threshold sqrt(Delta_min)/2 = 1.5 equals hard.
    np.testing.assert_array_equal(api.responsibilities(X, C, 1.4, kind="entmax15"), np.eye(3))


@_backend_params()
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_all_points_identical(backend, dtype):
    """All D_ij = 0: Delta_min = 0, soft maps share equally, hard picks centroid 0."""
    api = BACKENDS[backend]
    k, n, sigma = 3, 5, 0.5
    X = np.full((n, 2), 7.0, dtype=dtype)
    C = X[:k].copy()
    w = np.arange(1.0, n + 1)
    W = w.sum()
    np.testing.assert_array_equal(api.margins(X, C), np.zeros(n))
    labels, _ = api.assign(X, C)
    np.testing.assert_array_equal(labels, np.zeros(n))
    for kind in ("softmax", "entmax15"):
        r = api.responsibilities(X, C, sigma, kind=kind)
        np.testing.assert_allclose(r, np.full((n, k), 1 / 3), rtol=1e-6)
    T = 2 * sigma**2
    F = api.objective(X, C, sigma, kind="softmax", sample_weight=w)
    np.testing.assert_allclose(F, -T * W * np.log(k), rtol=1e-6)  # J - F attains its bound
    G = api.objective(X, C, sigma, kind="entmax15", sample_weight=w)
    np.testing.assert_allclose(G, -T * W * (4 / 3) * (1 - k**-0.5), rtol=1e-6)
    step = api.centroid_step(X, C, kind="hard", sample_weight=w)
    np.testing.assert_array_equal(step.empty, [False, True, True])
    np.testing.assert_array_equal(step.centroids, C)
    assert step.min_margin == 0.0 and step.distortion == 0.0
    for kind in ("softmax", "entmax15"):
        step = api.centroid_step(X, C, sigma, kind=kind, sample_weight=w)
        np.testing.assert_allclose(step.cluster_weights, np.full(k, W / k), rtol=1e-6)
        np.testing.assert_array_equal(step.centroids, C)
        assert step.min_margin == 0.0
    gX, gC = api.gradients(X, C, sigma, kind="softmax")
    # Zero up to the rounding of sum_j r_ij c_j (r = 1/3 is inexact): |x| = 7 sets the scale.
    np.testing.assert_allclose(gX, 0.0, atol=1e-5 * 7)
    np.testing.assert_allclose(gC, 0.0, atol=1e-5 * 7 * n)
    assert api.critical_sigma(X, sample_weight=w) == 0.0


@_backend_params()
def test_duplicate_centroids_share_and_hard_ties_go_to_smallest_index(backend):
    api = BACKENDS[backend]
    X = np.array([[0.0, 0.0], [0.5, 0.0], [10.0, 0.0], [9.0, 1.0]])
    C = np.array([[0.0, 0.0], [0.0, 0.0], [10.0, 0.0]])
    labels, _ = api.assign(X, C)
    np.testing.assert_array_equal(labels, [0, 0, 2, 2])
    np.testing.assert_array_equal(api.margins(X, C)[:2], [0.0, 0.0])
    for kind in ("softmax", "entmax15"):
        r = api.responsibilities(X, C, 0.05, kind=kind)
        np.testing.assert_array_equal(r[:, 0], r[:, 1])  # identical columns, exactly
        np.testing.assert_allclose(r[:2, :2], 0.5, rtol=1e-12)
    step = api.centroid_step(X, C, kind="hard")
    np.testing.assert_array_equal(step.empty, [False, True, False])
    np.testing.assert_array_equal(step.centroids, [[0.25, 0.0], [0.0, 0.0], [9.5, 0.5]])
    assert step.min_margin == 0.0


@_backend_params()
def test_single_centroid(backend):
    api = BACKENDS[backend]
    X = np.array([[0.0], [2.0], [4.0]])
    C = np.array([[1.0]])
    for kind in ("softmax", "entmax15"):
        np.testing.assert_array_equal(api.responsibilities(X, C, 0.3, kind=kind), np.ones((3, 1)))
        # log k = 0 and H(one-hot) = 0: every objective equals J = 1 + 1 + 9.
        assert api.objective(X, C, 0.3, kind=kind) == pytest.approx(11.0, rel=1e-12)
    step = api.centroid_step(X, C, kind="hard")
    assert step.min_margin == float("inf")
    np.testing.assert_array_equal(step.centroids, [[2.0]])


@_backend_params()
def test_zero_weights_exclude_points(backend):
    """w_i = 0 removes point i: same step as dropping it (margins only over w_i > 0)."""
    api = BACKENDS[backend]
    X = np.array([[0.0], [1.0], [5.0], [100.0]])
    C = np.array([[0.0], [6.0]])
    w = np.array([1.0, 1.0, 1.0, 0.0])
    for kind, s in (("hard", None), ("softmax", 1.0), ("entmax15", 1.0)):
        a = api.centroid_step(X, C, s, kind=kind, sample_weight=w)
        b = api.centroid_step(X[:3], C, s, kind=kind)
        np.testing.assert_allclose(a.centroids, b.centroids, rtol=1e-12)
        assert a.objective == pytest.approx(b.objective, rel=1e-12)
        assert a.min_margin == pytest.approx(b.min_margin, rel=1e-12)
    assert api.critical_sigma(X, sample_weight=w) == pytest.approx(
        api.critical_sigma(X[:3]), rel=1e-12
    )


@_backend_params()
def test_n_equals_one_and_d_equals_one(backend):
    api = BACKENDS[backend]
    X = np.array([[3.0]])
    C = np.array([[1.0], [4.0]])
    np.testing.assert_array_equal(api.sq_distances(X, C), [[4.0, 1.0]])
    np.testing.assert_array_equal(api.margins(X, C), [3.0])
    step = api.centroid_step(X, C, kind="hard")
    np.testing.assert_array_equal(step.empty, [True, False])
    np.testing.assert_array_equal(step.centroids, [[1.0], [3.0]])
    assert api.critical_sigma(X) == 0.0


@_backend_params()
def test_entmax15_extreme_finite_scores(backend):
    """Scores spanning the float64 range: the top entry alone gets everything, no overflow."""
    api = BACKENDS[backend]
    Z = np.array([[1e300, -1e300, 0.0], [-1e308, -1e308, -1e308], [1.0, 1.0, -5.0]])
    r = api.entmax15(Z)
    assert np.isfinite(r).all()
    np.testing.assert_array_equal(r[0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(r[1], [1 / 3] * 3, rtol=1e-12)
    np.testing.assert_allclose(r[2], [0.5, 0.5, 0.0], rtol=1e-12)


# ---------------------------------------------------------------------------------------
# The estimator (SoftKMeans): the same classes of bad input
# ---------------------------------------------------------------------------------------

XE = np.random.default_rng(3).normal(size=(20, 3))
ASSIGNMENTS = ("hard", "softmax", "entmax15")


def _fit(Xf, assignment, w=None, **kw):
    kw.setdefault("n_clusters", 3)
    kw.setdefault("max_iter", 30)
    return SoftKMeans(assignment=assignment, random_state=0, **kw).fit(Xf, sample_weight=w)


def _w_with(index, value, n=20):
    w = np.ones(n)
    w[index] = value
    return w


ESTIMATOR_BAD = [
    ("nan-X", np.where(XE > 1.5, np.nan, XE), None, {}, ValueError, "X contains NaN"),
    ("inf-X", np.where(XE > 1.5, np.inf, XE), None, {}, ValueError, "X contains infinity"),
    ("X-1d", XE[0], None, {}, ValueError, "Expected 2D array"),
    ("X-3d", XE[None], None, {}, ValueError, "dim 3"),
    ("n=0", np.empty((0, 3)), None, {}, ValueError, "0 sample"),
    ("d=0", np.empty((20, 0)), None, {}, ValueError, "0 feature"),
    ("k=0", XE, None, {"n_clusters": 0}, ValueError, "n_clusters must be >= 1"),
    ("k>n", XE, None, {"n_clusters": 21}, ValueError, "n_samples=20 should be >= n_clusters=21"),
    ("k-float", XE, None, {"n_clusters": 2.5}, TypeError, "n_clusters"),
    ("sigma=0", XE, None, {"sigma": 0.0}, ValueError, "sigma must be finite and > 0"),
    ("sigma<0", XE, None, {"sigma": -1.0}, ValueError, "sigma must be finite and > 0"),
    ("sigma-nan", XE, None, {"sigma": np.nan}, ValueError, "sigma must be finite and > 0"),
    ("sigma-inf", XE, None, {"sigma": np.inf}, ValueError, "sigma must be finite and > 0"),
    ("sigma-str", XE, None, {"sigma": "1"}, TypeError, "sigma must be a real number"),
    ("w-nan", XE, _w_with(3, np.nan), {}, ValueError, "sample_weight contains NaN"),
    ("w-inf", XE, _w_with(3, np.inf), {}, ValueError, "sample_weight contains NaN or infinity"),
    ("w-negative", XE, _w_with(3, -1.0), {}, ValueError, "sample_weight must be non-negative"),
    ("w-all-zero", XE, np.zeros(20), {}, ValueError, "sample_weight is all zero"),
    ("w-length", XE, np.ones(19), {}, ValueError, "sample_weight has 19 entries"),
    ("X-complex", XE.astype(complex), None, {}, ValueError, "Complex data not supported"),
    ("X-overflow32", (XE * 1e20).astype(np.float32), None, {}, ValueError, "X has values up to"),
    ("X-overflow64", XE * 1e160, None, {}, ValueError, "X has values up to"),
    ("assignment", XE, None, {"assignment": "soft"}, ValueError, "assignment must be one of"),
    (
        "init-d",
        XE,
        None,
        {"init": np.zeros((3, 2))},
        ValueError,
        r"initial centers \(3, 2\) does not match the number of features of the data 3",
    ),
    (
        "init-k",
        XE,
        None,
        {"init": np.zeros((2, 3))},
        ValueError,
        r"initial centers \(2, 3\) does not match the number of clusters 3",
    ),
    ("init-nan", XE, None, {"init": np.full((3, 3), np.nan)}, ValueError, "init contains NaN"),
    ("n_init=0", XE, None, {"n_init": 0}, ValueError, "'n_init' parameter of SoftKMeans"),
    ("max_iter=0", XE, None, {"max_iter": 0}, ValueError, "max_iter must be >= 1"),
    ("tol<0", XE, None, {"tol": -1.0}, ValueError, "tol must be finite and >= 0"),
    ("n_threads=0", XE, None, {"n_threads": 0}, ValueError, "n_threads"),
    ("init-str", XE, None, {"init": "kmeans"}, ValueError, "'init' parameter of SoftKMeans"),
    ("anneal-type", XE, None, {"anneal": "yes"}, TypeError, "anneal must be None, True, a dict"),
    ("anneal-cooling", XE, None, {"anneal": {"cooling": 1.5}}, ValueError, "cooling must be in"),
]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
@pytest.mark.parametrize(
    ("Xb", "w", "kw", "exc", "match"),
    [p[1:] for p in ESTIMATOR_BAD],
    ids=[p[0] for p in ESTIMATOR_BAD],
)
def test_estimator_bad_input(assignment, Xb, w, kw, exc, match):
    kw = dict(kw)
    assignment = kw.pop("assignment", assignment)
    with pytest.raises(exc, match=match):
        _fit(Xb, assignment, w, **kw)


@pytest.mark.parametrize("dtype", [str, np.longdouble])
def test_estimator_refuses_what_the_functional_api_refuses(dtype):
    """Regression: validate_data used to parse numeric strings and round long double."""
    with pytest.raises(TypeError, match="X must be a real numeric array"):
        softkmeans.sq_distances(XE.astype(dtype), XE[:3])  # the functional API refuses it
    with pytest.raises(TypeError, match="X must be a real numeric array"):
        _fit(XE.astype(dtype), "softmax")
    fitted = _fit(XE, "softmax")
    with pytest.raises(TypeError, match="X must be a real numeric array"):
        fitted.predict(XE.astype(dtype))


def test_estimator_object_arrays_follow_scikit_learn():
    """Object arrays of numbers fit like float64 (check_dtype_object); non-numbers fail."""
    expected = _fit(XE, "softmax")
    got = _fit(XE.astype(object), "softmax")
    np.testing.assert_array_equal(got.cluster_centers_, expected.cluster_centers_)
    bad = XE.astype(object)
    bad[0, 0] = {"foo": "bar"}
    with pytest.raises((TypeError, ValueError)):
        _fit(bad, "softmax")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_estimator_lossless_conversions_and_layouts(assignment):
    Xi = np.round(XE * 4).astype(np.int64)
    expected = _fit(Xi.astype(np.float64), assignment)
    for Xc in (
        Xi.astype(np.int32),
        Xi.astype(np.float16),
        np.asfortranarray(Xi.astype(np.float64)),
        np.ascontiguousarray(Xi[::-1].astype(np.float64))[::-1],
        np.repeat(Xi.astype(np.float64), 2, axis=1)[:, ::2],
    ):
        got = _fit(Xc, assignment)
        assert got.cluster_centers_.dtype == np.float64
        np.testing.assert_array_equal(got.cluster_centers_, expected.cluster_centers_)
        np.testing.assert_array_equal(got.labels_, expected.labels_)
    ro = Xi.astype(np.float64)
    ro.flags.writeable = False
    np.testing.assert_array_equal(_fit(ro, assignment).labels_, expected.labels_)
    got32 = _fit(Xi.astype(np.float32), assignment)
    assert got32.cluster_centers_.dtype == np.float32


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_estimator_all_points_identical(assignment):
    """One distinct point, k = 3: a warning, every centre at the point, inertia 0."""
    X = np.full((10, 2), 3.0)
    with pytest.warns(UserWarning, match="distinct"):
        est = _fit(X, assignment)
    np.testing.assert_allclose(est.cluster_centers_, 3.0, rtol=1e-12)
    assert est.inertia_ == 0.0
    assert np.isfinite(est.objective_)
    assert est.min_margin_ == 0.0


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_estimator_k_equals_n(assignment):
    """k = n with well separated points: each point is its own centre."""
    X = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    est = _fit(X, assignment, n_clusters=4, sigma=0.5, init=X[::-1].copy())
    np.testing.assert_allclose(np.sort(est.cluster_centers_, axis=0), np.sort(X, axis=0), atol=1e-9)
    assert sorted(est.labels_) == [0, 1, 2, 3]


def test_estimator_predict_checks_features():
    est = _fit(XE, "softmax")
    for method in (est.predict, est.predict_proba, est.transform):
        with pytest.raises(ValueError, match="features"):
            method(XE[:, :2])
        with pytest.raises(ValueError, match="NaN"):
            method(np.where(XE > 1.5, np.nan, XE))
