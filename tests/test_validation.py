"""The binding layer (softkmeans._core) called directly: its own guards and its build report.

The public functions validate and convert their input (tests/test_bad_input.py) before
they reach the binding. The binding checks again what would break the raw-pointer
contract of the C++ kernels (C-contiguity, dtype, shapes) and throws C++ exceptions that
pybind11 turns into Python ones; .ci/sanitize.sh runs this file against the ASan+UBSan
build for those exceptions.
"""

from __future__ import annotations

import numpy as np
import pytest

import softkmeans
from softkmeans import _core


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


def test_core_accepts_equivalent_float32_dtype():
    """Regression: the binding told float32 by dtype identity and refused an equal dtype."""
    a = np.ones((3, 2), dtype=np.dtype("<f4").newbyteorder("="))
    assert a.dtype == np.float32 and a.dtype is not np.dtype(np.float32)
    D = _core.sq_distances(a, a, 0)
    assert D.dtype == np.float32
    np.testing.assert_array_equal(D, np.zeros((3, 3)))


def test_build_info():
    """What the compiled module reports about its build (SIMD levels, OpenMP, threads)."""
    info = softkmeans.build_info()
    assert info["simd_selected"] in info["simd_available"]
    assert "scalar" in info["simd_available"]
    assert info["default_threads"] >= 1
    assert info["openmp"] >= 201307
