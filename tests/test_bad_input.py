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
- object, complex, long double, datetime, str arrays        -> TypeError naming the argument
- values whose squared distances overflow the dtype         -> ValueError "rescale the data"
- k = 1                       -> margins: ValueError "at least 2 centroids"
- unknown kind, bad n_threads                               -> ValueError / TypeError naming it

SoftKMeans: scikit-learn's validate_data messages for X (NaN, infinity, ndim, n = 0,
d = 0, complex), softkmeans._validation's for sigma, sample_weight and magnitudes;
k > n_samples -> ValueError; all points identical -> a UserWarning and every centre at the
point. Strings and long double are refused with the functional API's TypeError; object
arrays of numbers are accepted (scikit-learn's convention, check_dtype_object), object arrays
holding anything else fail in scikit-learn's conversion.

The reference and the native backend must raise the same exception type (and, since
both use softkmeans._validation, the same message) for the same bad input. Valid but
unusual input (lossless conversions, layouts, degenerate problems with documented results)
is test_valid_edge_input.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import softkmeans
from conftest import API_CALLS, assert_identical
from softkmeans import SoftKMeans, reference

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
