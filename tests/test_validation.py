"""Bad input to the native functions gives a clear Python exception, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

import softkmeans
from softkmeans import _core

X = np.arange(12, dtype=np.float64).reshape(6, 2)
C = X[:3].copy()

NATIVE_XC = [softkmeans.sq_distances, softkmeans.assign]


def _assert_same(got, expected):
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for a, b in zip(got, expected, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("f", NATIVE_XC)
@pytest.mark.parametrize(
    ("Xbad", "Cbad", "exc", "match"),
    [
        (X[0], C, ValueError, "X must be 2-dimensional"),
        (X[None], C, ValueError, "X must be 2-dimensional"),
        (X, C[0], ValueError, "C must be 2-dimensional"),
        (X, np.ones((3, 5)), ValueError, "features"),
        (np.where(X > 5, np.nan, X), C, ValueError, "X contains NaN"),
        (X, np.where(C > 1, np.inf, C), ValueError, "C contains NaN or infinity"),
        (X.astype(object), C, TypeError, "X must be a real numeric array"),
        (X.astype(complex), C, TypeError, "X must be a real numeric array"),
        (np.array([["a", "b"]]), C, TypeError, "X must be a real numeric array"),
        (np.empty((0, 2)), C, ValueError, "X must not be empty"),
        (np.empty((3, 0)), np.empty((2, 0)), ValueError, "X must not be empty"),
        (X, np.empty((0, 2)), ValueError, "C must not be empty"),
        ([[1.0, 2.0], [3.0]], C, TypeError, "X could not be converted"),
    ],
)
def test_bad_input_raises(f, Xbad, Cbad, exc, match):
    with pytest.raises(exc, match=match):
        f(Xbad, Cbad)


@pytest.mark.parametrize("f", NATIVE_XC)
@pytest.mark.parametrize("n_threads", [0, -1, 1.5, "2", True])
def test_bad_n_threads(f, n_threads):
    with pytest.raises((TypeError, ValueError), match="n_threads"):
        f(X, C, n_threads=n_threads)


@pytest.mark.parametrize("f", NATIVE_XC)
def test_lossless_conversions_are_accepted(f):
    """int, bool and float16 convert to float64; lists work; C follows X's dtype."""
    expected = f(X, C)
    for Xc, Cc in [(X.astype(np.int32), C.astype(np.int64)), (X.tolist(), C.tolist())]:
        _assert_same(f(Xc, Cc), expected)
    got = softkmeans.sq_distances(X.astype(np.float32), C)  # C converted to float32
    assert got.dtype == np.float32
    got = softkmeans.sq_distances((X > 3), C.astype(bool))
    assert got.dtype == np.float64


@pytest.mark.parametrize("f", NATIVE_XC)
def test_non_contiguous_layouts_give_correct_results(f):
    big = np.arange(48, dtype=np.float64).reshape(6, 8)
    strided = big[:, ::4]  # (6, 2), non-contiguous
    fortran = np.asfortranarray(X)
    reversed_rows = X[::-1]
    for Xl in (strided, fortran, reversed_rows):
        _assert_same(f(Xl, C), f(np.ascontiguousarray(Xl), C))


def test_core_guards_its_own_contract():
    """The binding layer refuses what would break the raw-pointer contract, even if called directly."""  # noqa: E501
    with pytest.raises(TypeError, match="C-contiguous"):
        _core.sq_distances(np.asfortranarray(np.ones((3, 2))), np.ones((2, 2)), 0)
    with pytest.raises(TypeError, match="C-contiguous"):
        _core.sq_distances(np.ones((3, 2)), np.ones((2, 2), dtype=np.float32), 0)
    with pytest.raises(ValueError, match="same number of columns"):
        _core.sq_distances(np.ones((3, 2)), np.ones((2, 3)), 0)
    with pytest.raises(ValueError, match="2-dimensional"):
        _core.assign(np.ones(3), np.ones((2, 3)), 0)


def test_build_info():
    info = softkmeans.build_info()
    assert info["simd_selected"] in info["simd_available"]
    assert "scalar" in info["simd_available"]
    assert info["default_threads"] >= 1
    assert info["openmp"] >= 201307
