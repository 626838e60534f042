"""k-means|| seeding's native row helpers (`softkmeans._native.row_uniforms`,
`take_closer`) against references written here: SplitMix64 in Python integers (checked
against its published outputs) and the nearest-candidate update in NumPy, at 1-3
threads; and their errors on bad input."""

from __future__ import annotations

import numpy as np
import pytest

from softkmeans import _native

_MASK = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# Enough rows that the kernels run on every thread asked for.
_ROWS = 200_003


def _finaliser(z):
    """SplitMix64's finaliser on a uint64 array (arithmetic mod 2^64)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _reference_uniforms(seed, round_, start, stop):
    with np.errstate(over="ignore"):
        seed_round = _finaliser(np.array([seed, round_], dtype=np.uint64) * _GOLDEN)
        key = _finaliser(seed_round[:1] ^ seed_round[1:])
        hashes = _finaliser(np.arange(start, stop, dtype=np.uint64) * _GOLDEN + key)
    return (hashes >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def test_the_reference_finaliser_gives_splitmix64s_published_outputs():
    # SplitMix64 seeded with 0: its n-th output is the finaliser of n * golden.
    with np.errstate(over="ignore"):
        outputs = _finaliser(np.arange(1, 4, dtype=np.uint64) * _GOLDEN)
    assert outputs.tolist() == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize(
    "seed, round_, start, stop",
    [
        (0, 0, 0, _ROWS),
        (123, 2, 7, 2500),
        (_MASK, 1 << 32, 10**12, 10**12 + _ROWS),
        (5, 1, 9, 9),
    ],
)
def test_row_uniforms_equal_the_reference(seed, round_, start, stop, n_threads):
    native = _native.row_uniforms(seed, round_, start, stop, n_threads)
    assert native.dtype == np.float64 and native.shape == (stop - start,)
    np.testing.assert_array_equal(native, _reference_uniforms(seed, round_, start, stop))


def _reference_take_closer(dist, labels, first, closest, nearest):
    closer = dist.astype(np.float64) < closest
    closest, nearest = closest.copy(), nearest.copy()
    closest[closer] = dist[closer]
    nearest[closer] = labels[closer] + first
    return closest, nearest


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_take_closer_equals_the_reference(dtype, n_threads):
    rng = np.random.default_rng(3)
    n = _ROWS
    dist = rng.uniform(0, 2, n).astype(dtype)
    closest = rng.uniform(0, 2, n)
    closest[::7] = np.inf  # rows with no candidate yet
    closest[3::11] = dist[3::11]  # equal: the earlier candidate stays
    labels = rng.integers(0, 40, n)
    nearest = rng.integers(0, 90, n)
    expected = _reference_take_closer(dist, labels, 90, closest, nearest)
    _native.take_closer(dist, labels, 90, closest, nearest, n_threads)
    np.testing.assert_array_equal(closest, expected[0])
    np.testing.assert_array_equal(nearest, expected[1])
    assert (nearest[3::11] == expected[1][3::11]).all()


def test_bad_input_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="start <= stop"):
        _native.row_uniforms(1, 0, 5, 4, 1)
    with pytest.raises(TypeError):
        _native.row_uniforms(-1, 0, 0, 4, 1)  # seeds are uint64
    dist, labels = np.zeros(4, np.float32), np.zeros(4, np.int64)
    closest, nearest = np.ones(4), np.zeros(4, np.int64)
    with pytest.raises(ValueError, match="closest must be 1-dimensional with 4"):
        _native.take_closer(dist, labels, 0, np.ones(3), nearest, 1)
    with pytest.raises(TypeError, match="nearest must be a C-contiguous array of dtype int64"):
        _native.take_closer(dist, labels, 0, closest, nearest.astype(np.int32), 1)
    with pytest.raises(ValueError, match="dist must be 1-dimensional"):
        _native.take_closer(np.zeros((4, 1)), labels, 0, closest, nearest, 1)
    closest.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        _native.take_closer(dist, labels, 0, closest, nearest, 1)
