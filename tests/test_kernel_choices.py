"""Choices made for speed never change a bit (SPEC.md; issue 33, item 1).

Each kernel choice this machine has (tile bytes, the direct path's lane threshold, the
lane reduction's register blocking and pipelining, the prefetch distance, the bf16
candidate pass and its thresholds) is forced through the override and every entry point's
output bytes are compared with those of the choices made for this CPU: every kind, float32
and float64, dense and CSR, the bounded and grouped hard paths, 1 to 3 threads. The shapes
put each choice on both of its sides: the direct path below and above small_k, the lane
reduction with one and many centroid blocks and at d = 16 (lane_pipeline), the bf16 pass
engaged by its thresholds and forced on everywhere. SOFTKMEANS_TEST_ALL_VARIANTS=1 (CI)
runs every variant at every thread count; by default each variant runs at one of them.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import softkmeans
from conftest import KINDS, THREAD_COUNTS, assert_same_bits, bits_of, make_blobs
from softkmeans import _native

ALL = os.environ.get("SOFTKMEANS_TEST_ALL_VARIANTS", "") == "1"

VARIANTS = {
    "bf16_off": "bf16=off",
    "amx_off": "amx=off",
    "small_k_none": "small_k=0",
    "small_k_all": "small_k=1000000",
    "lane_blocking_2x8": "lane_blocking=2x8",
    "lane_pipeline_off": "lane_pipeline=off",
    "lane_pipeline_on": "lane_pipeline=on",
    "prefetch_none": "prefetch_groups=0",
    "prefetch_far": "prefetch_groups=4",
    "tiny_blocks": "dist_block_bytes=1,softmax_block_bytes=1,softmax_group_bytes=1,"
    "lane_block_bytes=1,softmax_rows_bytes=1,panel_bytes=1",
    "large_blocks": "dist_block_bytes=4194304,softmax_block_bytes=16777216,"
    "softmax_group_bytes=1048576,lane_block_bytes=1048576,softmax_rows_bytes=67108864,"
    "panel_bytes=67108864",
    "narrow_never": "narrow_softmax_min_dim=1000000000",
    "narrow_everywhere": "narrow_softmax_min_dim=0",
    "all_changed": "small_k=0,lane_blocking=2x8,prefetch_groups=0,dist_block_bytes=4096,"
    "softmax_block_bytes=4096,softmax_group_bytes=64,lane_block_bytes=1024",
}
if _native.bf16_available():
    everywhere = "bf16=on,bf16_min_dim=0,bf16_min_k=0,bf16_min_work=0"
    VARIANTS["bf16_everywhere"] = everywhere
    VARIANTS["all_changed_bf16"] = VARIANTS["all_changed"] + "," + everywhere

# (n, d, k): the direct path at k below and above small_k (and the lane accumulator's
# k <= 16), the lane reduction (d = 37: one and many 32 KiB centroid blocks; d = 16, where
# lane_pipeline engages, k = 100 a tail of 4 centroids past its steps of 8), the bf16
# pass engaged by the default thresholds (d = 64, k = 1024) and below them (k = 600), the
# narrow softmax accumulation (few centroids at wide d: one group and three, a tail of d).
# n k d >= 2^20 where threads matter (kSerialWork).
SHAPES = [(60_001, 2, 9), (9_001, 3, 100), (2_003, 37, 71), (4_001, 16, 100), (1_201, 64, 600),
          (517, 64, 1024), (1_201, 300, 5), (701, 257, 20)]
SHAPE_IDS = [f"n{n}-d{d}-k{k}" for n, d, k in SHAPES]
DTYPES = (np.float32, np.float64)


def _problem(shape, dtype):
    n, d, k = shape
    X, C = make_blobs(n, d, k, dtype=dtype, seed=n + 7 * d + k)
    w = np.random.default_rng(1).uniform(0.0, 2.0, size=n)
    D = softkmeans.sq_distances(X, C)
    sigma = 0.5 * float(np.sqrt(np.median(D.min(axis=1)) + 1e-3))
    C_prev = (C + np.random.default_rng(2).normal(scale=0.05, size=C.shape)).astype(dtype)
    return X, C, C_prev, w, sigma


def _bounded(X, C, C_prev, w, t):
    """Two bounded hard steps (bounds from nothing, then carried), by groups of 1-3."""
    k = C.shape[0]
    group = np.ascontiguousarray((np.arange(k) * 7 + 3) % min(64, max(1, (k + 1) // 2)))
    labels = np.zeros(X.shape[0], np.int64)
    lower = np.zeros((X.shape[0], int(group.max()) + 1))
    first = _native.hard_stats_bounded(X, C_prev, C_prev, w, labels, lower, group, t)
    second = _native.hard_stats_bounded(X, C, C_prev, w, labels, lower, group, t)
    return first, second, labels, lower


def _projection(X, C):
    """(Q, mu) for `assign_projected`: orthonormal axes, p = d / 4 (1 to 31)."""
    d = X.shape[1]
    p = max(1, min(31, d // 4))
    Q = np.linalg.qr(np.random.default_rng(d).normal(size=(d, p)))[0]
    return np.ascontiguousarray(Q), C.astype(np.float64).mean(axis=0)


def _outputs(problem, t):
    """Every entry point on the problem at t threads: a name -> bits dict."""
    X, C, C_prev, w, sigma = problem
    group = np.ascontiguousarray(np.arange(C.shape[0]) % 5, dtype=np.int64)
    Xs = sp.csr_matrix(np.where(np.arange(X.shape[1]) % 3 == 0, 0, X).astype(X.dtype))
    out = {
        "sq_distances": softkmeans.sq_distances(X, C, n_threads=t),
        "assign": softkmeans.assign(X, C, n_threads=t),
        "margins": softkmeans.margins(X, C, n_threads=t),
        "bounded": _bounded(X, C, C_prev, w, t),
        "grouped": _native.assign_grouped(X, C, group, t),
        "nearest_two_grouped": _native.nearest_two_grouped(X, C, group, t),
        "csr_assign": softkmeans.assign(Xs, C, n_threads=t),
        "projected": _native.assign_projected(X, C, *_projection(X, C), t, margins=True)[:-1],
    }
    for kind in KINDS:
        args = (X, C, sigma)
        out[f"responsibilities-{kind}"] = softkmeans.responsibilities(*args, kind=kind, n_threads=t)
        out[f"objective-{kind}"] = softkmeans.objective(
            *args, kind=kind, sample_weight=w, n_threads=t
        )
        out[f"centroid_step-{kind}"] = softkmeans.centroid_step(
            *args, kind=kind, sample_weight=w, n_threads=t
        )
        out[f"gradients-{kind}"] = softkmeans.gradients(
            *args, kind=kind, sample_weight=w, n_threads=t
        )
        out[f"csr_centroid_step-{kind}"] = softkmeans.centroid_step(
            Xs, C, sigma, kind=kind, sample_weight=w, n_threads=t
        )
    return {name: bits_of(o) for name, o in out.items()}


_BASELINE = {}


def _baseline(shape, dtype):
    """The outputs under this CPU's own choices, one thread (computed once)."""
    key = (shape, np.dtype(dtype).name)
    if key not in _BASELINE:
        _native.reset_kernel_choices()
        problem = _problem(shape, dtype)
        _BASELINE[key] = problem, _outputs(problem, 1)
    return _BASELINE[key]


@pytest.fixture
def restore_choices():
    yield
    _native.reset_kernel_choices()


def _assert_same(ref, got, what):
    for name, ref_bits in ref.items():
        assert_same_bits(ref_bits, got[name], f"{what}: {name}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_gives_the_same_bytes(variant, shape, dtype, restore_choices):
    problem, ref = _baseline(shape, dtype)
    index = list(VARIANTS).index(variant) + SHAPES.index(shape)
    threads = THREAD_COUNTS if ALL else (THREAD_COUNTS[index % len(THREAD_COUNTS)],)
    _native.set_kernel_choices(VARIANTS[variant])
    for t in threads:
        _assert_same(ref, _outputs(problem, t), f"{variant} at {t} threads")


def test_entmax15_of_scores_under_every_variant(restore_choices):
    Z = np.random.default_rng(5).normal(scale=2.0, size=(777, 301)).astype(np.float32)
    ref = bits_of(softkmeans.entmax15(Z))
    for spec in VARIANTS.values():
        _native.set_kernel_choices(spec)
        assert bits_of(softkmeans.entmax15(Z, n_threads=2)) == ref, spec


def test_build_info_reports_every_choice_and_why():
    info = softkmeans.build_info()
    choices = info["kernel_choices"]
    names = {
        "dist_block_bytes",
        "softmax_block_bytes",
        "softmax_group_bytes",
        "narrow_softmax_min_dim",
        "softmax_rows_bytes",
        "panel_bytes",
        "lane_block_bytes",
        "small_k",
        "lane_blocking",
        "lane_pipeline",
        "prefetch_groups",
        "bf16",
        "bf16_min_dim",
        "bf16_min_k",
        "bf16_min_work",
        "amx",
    }
    assert set(choices) >= names
    for name in names:
        source = choices[name]["source"]
        assert source.startswith(("table: ", "override (")) or source in ("probe", "default")
    cpu = info["cpu"]
    assert {"vendor", "family", "model", "avx512_bf16", "amx_bf16"} <= set(cpu)


def test_set_reports_its_source_and_reset_undoes_it(restore_choices):
    before = _native.kernel_choices()
    _native.set_kernel_choices("small_k=7,prefetch_groups=3")
    now = _native.kernel_choices()
    assert now["small_k"] == {"value": "7", "source": "set"}
    assert now["prefetch_groups"] == {"value": "3", "source": "set"}
    _native.reset_kernel_choices()
    assert _native.kernel_choices() == before


@pytest.mark.parametrize(
    "spec, message",
    [
        ("small_k=-1", "bad value '-1' for kernel choice 'small_k'"),
        ("lane_blocking=3x3", "bad value '3x3' for kernel choice 'lane_blocking'"),
        ("bf16", "bad value '' for kernel choice 'bf16'"),
        ("tile=4", "unknown kernel choice 'tile'"),
    ],
)
def test_bad_choice_is_a_value_error_naming_it(spec, message, restore_choices):
    before = _native.kernel_choices()
    with pytest.raises(ValueError, match=message):
        _native.set_kernel_choices(f"prefetch_groups=0,{spec}")
    assert _native.kernel_choices() == before  # nothing of a bad spec applied


def _in_subprocess(env, code):
    full = {**os.environ, **env}
    run = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout


REPORT = "import softkmeans; c = softkmeans.build_info()['kernel_choices']; print(repr(c))"


def test_environment_override_is_reported_as_such():
    spec = "lane_blocking=2x8,small_k=3"
    choices = eval(_in_subprocess({"SOFTKMEANS_KERNEL_CHOICES": spec}, REPORT))
    source = "override (SOFTKMEANS_KERNEL_CHOICES)"
    assert choices["lane_blocking"] == {"value": "2x8", "source": source}
    assert choices["small_k"] == {"value": "3", "source": source}


def test_bad_environment_override_is_ignored_and_reported():
    choices = eval(_in_subprocess({"SOFTKMEANS_KERNEL_CHOICES": "small_k=x"}, REPORT))
    assert "ignored" in choices["SOFTKMEANS_KERNEL_CHOICES"]["source"]
    assert not choices["small_k"]["source"].startswith("override")


def test_probe_makes_the_probed_choices():
    # "probe" probes whatever the table says; an override still wins over the probe.
    env = {"SOFTKMEANS_KERNEL_CHOICES": "probe,lane_blocking=2x8"}
    choices = eval(_in_subprocess(env, REPORT))
    assert choices["bf16"]["source"] == "probe"
    assert choices["bf16"]["value"] in ("on", "off")
    assert choices["lane_pipeline"]["source"] == "probe"
    assert choices["lane_pipeline"]["value"] in ("on", "off")
    assert choices["lane_blocking"]["source"].startswith("override")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("k", [1, 7, 8, 20, 32])
def test_narrow_softmax_step_is_the_dense_steps_bytes(k, dtype, restore_choices):
    """Few centroids at wide d (the narrow accumulation, its small row blocks, the sliced
    distance panels) against the dense accumulation, at widths where most rows are split
    between centroids (the shared shapes' sigma leaves them nearly one-hot) and with
    zero-weight rows, a zero row and a tail of d."""
    n, d = 203, 331
    X, C = make_blobs(n, d, k, dtype=dtype, seed=k)
    X[5] = 0
    w = np.random.default_rng(k).uniform(0.0, 2.0, size=n)
    w[::7] = 0.0
    spread = float(np.sqrt(np.median(softkmeans.sq_distances(X, C))))
    for sigma in (0.3 * spread, 2.0 * spread):
        _native.set_kernel_choices("narrow_softmax_min_dim=1000000000")
        ref = bits_of(softkmeans.centroid_step(X, C, sigma, sample_weight=w, n_threads=2))
        for spec in ("narrow_softmax_min_dim=0", "softmax_rows_bytes=1,panel_bytes=1",
                     "softmax_rows_bytes=67108864,panel_bytes=256"):  # fmt: skip
            _native.set_kernel_choices("narrow_softmax_min_dim=0," + spec)
            got = softkmeans.centroid_step(X, C, sigma, sample_weight=w, n_threads=2)
            assert_same_bits(ref, bits_of(got), f"{spec}, k = {k}, sigma = {sigma}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: np.dtype(t).name)
def test_rows_on_centroids_over_many_centroid_blocks(dtype, restore_choices):
    """Every centroid is a row (its distance 0, the kernel's within rounding of it) where the
    lane reduction takes the centroids in several blocks (k d past lane_block_bytes), first
    unclamped: no distance below 0, and the bytes of the reduction in one block."""
    n, d, k = 3_001, 100, 200
    X, C = make_blobs(n, d, k, dtype=dtype, seed=11)
    X[: 3 * k : 3] = C
    w = np.random.default_rng(3).uniform(0.5, 2.0, size=n)

    def outputs():
        labels, dist = softkmeans.assign(X, C, n_threads=2)
        step = softkmeans.centroid_step(X, C, 1.0, kind="hard", sample_weight=w, n_threads=2)
        return labels, dist, softkmeans.margins(X, C, n_threads=2), step

    _native.set_kernel_choices("lane_block_bytes=1073741824")
    one_block = bits_of(outputs())
    _native.set_kernel_choices("lane_block_bytes=4096")
    labels, dist, margins, step = outputs()
    assert dist.min() >= 0.0 and margins.min() >= 0.0
    assert_same_bits(one_block, bits_of((labels, dist, margins, step)), "several blocks")
