"""entmax15 rows on each of the native core's paths: short rows (k <= 8) in the vector
lanes with a sorting network, longer rows one by one with the sort-free threshold
(Newton steps and SPEC.md's closed form), and the rows left over after the lane groups.
Each is checked against the float64 reference and against the others."""

import numpy as np
import pytest

import softkmeans
from conftest import DTYPES, assert_rel_close
from softkmeans import reference

# Row counts around the lane groups (2, 4 or 8 rows by SIMD level): a lone row, a
# partial group, whole groups and a remainder.
ROW_COUNTS = (1, 3, 8, 13)
# Widths on both sides of the lane path's limit (8) and of a vector, and wide rows.
WIDTHS = (1, 2, 3, 5, 8, 9, 16, 64, 1024)


def _scores(n, k, dtype, seed):
    rng = np.random.default_rng(seed)
    Z = rng.normal(scale=1.5, size=(n, k))
    Z[1::3, k // 2 :] = Z[1::3, : k - k // 2]  # tied entries
    Z[2::3] = np.round(4 * Z[2::3]) / 2  # exact halves: ties and gaps of exactly 2
    return Z.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", WIDTHS)
@pytest.mark.parametrize("n", ROW_COUNTS)
def test_entmax15_rows_match_reference_on_every_path(dtype, k, n, simd_level):
    Z = _scores(n, k, dtype, seed=k * 100 + n)
    r = softkmeans.entmax15(Z)
    r_ref = reference.entmax15(Z.astype(np.float64))
    assert r.dtype == dtype and r.shape == Z.shape
    assert_rel_close(r, r_ref, dtype, "entmax15", scale=1.0)
    z = Z.astype(np.float64)
    never = z <= z.max(axis=1, keepdims=True) - 2  # SPEC.md: never in the support
    np.testing.assert_array_equal(r[never], 0)


@pytest.mark.parametrize("k", (2, 5, 8, 64))
def test_entmax15_row_is_the_same_in_a_lane_group_and_alone(k, simd_level):
    """Rows of a lane group and a row computed alone (the one-by-one path) agree."""
    Z = _scores(16, k, np.float64, seed=k)
    together = softkmeans.entmax15(Z)
    alone = np.concatenate([softkmeans.entmax15(Z[i : i + 1]) for i in range(Z.shape[0])])
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(together == 0, alone == 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", (2, 8, 9, 64))
def test_entmax15_gap_of_exactly_two_is_one_hot(dtype, k, simd_level):
    """z_j = max z - 2 for every other j: the top entry alone has mass 1, exactly."""
    Z = np.full((9, k), 1.0)
    Z[np.arange(9), np.arange(9) % k] = 3.0
    r = softkmeans.entmax15(Z.astype(dtype))
    want = (Z == 3.0).astype(dtype)
    np.testing.assert_array_equal(r, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", (1, 2, 3, 7, 8, 9, 64, 1024))
def test_entmax15_equal_scores_share_equally(dtype, k, simd_level):
    r = softkmeans.entmax15(np.full((5, k), -7.25, dtype=dtype))
    assert_rel_close(r, np.full((5, k), 1.0 / k), dtype, "entmax15", scale=1.0 / k)


@pytest.mark.parametrize("k", (64, 1024))
@pytest.mark.parametrize("power", (0.25, 1.0, 4.0))
def test_entmax15_wide_supports_match_reference(k, power, simd_level):
    """Supports from a few entries to most of the row (many threshold steps)."""
    j = np.arange(k) / k
    Z = np.stack([-2.0 * s * j**power for s in (0.01, 0.3, 1.0, 5.0, 40.0)])
    r = softkmeans.entmax15(Z)
    r_ref = reference.entmax15(Z)
    assert_rel_close(r, r_ref, np.float64, "entmax15", scale=1.0)
    np.testing.assert_array_equal(r == 0, r_ref == 0)
