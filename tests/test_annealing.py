"""Deterministic annealing: the first split at the critical width, an exact Lloyd finish."""

from __future__ import annotations

import numpy as np
import pytest

import softkmeans
from conftest import make_blobs
from softkmeans import AnnealingSchedule, SoftKMeans
from softkmeans.fit.annealing_schedule import check_schedule


def _elongated(seed=0, n=400):
    # Leading eigenvalue 9, next 1: a clear leading direction.
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 3)) * np.array([3.0, 1.0, 0.5])


def test_first_split_happens_at_the_critical_sigma():
    X = _elongated()
    crit = softkmeans.critical_sigma(X)
    assert crit == pytest.approx(3.0, rel=0.1)  # the construction, not our output
    m = SoftKMeans(2, anneal={"cooling": 0.95}, random_state=0).fit(X)
    first = m.history_["transitions"][0]
    assert first["n_before"] == 1 and first["n_after"] >= 2
    assert abs(first["sigma"] - crit) <= 0.1 * crit
    # Nothing split above the critical width.
    sig = m.history_["sigma"][: first["iteration"]]
    assert sig.size and sig.min() > crit


def test_no_split_when_stopping_above_the_critical_sigma():
    X = _elongated(1)
    crit = softkmeans.critical_sigma(X)
    sched = AnnealingSchedule(start=1.5 * crit, stop=1.1 * crit, cooling=0.9, finish=False)
    m = SoftKMeans(3, anneal=sched, random_state=0).fit(X)
    assert m.history_["transitions"] == []
    # One centroid at the weighted mean the whole time: F_sigma of one cluster.
    mu = X.mean(axis=0)
    J1 = ((X - mu) ** 2).sum()
    np.testing.assert_allclose(m.history_["J"], J1, rtol=1e-9)


@pytest.mark.parametrize("kind", ["hard", "softmax", "entmax15"])
def test_annealing_ends_at_a_lloyd_fixed_point(kind):
    X = _blobs()
    schedule = {"cooling": 0.8, "kind": "softmax" if kind == "hard" else kind}
    m = SoftKMeans(4, assignment=kind, anneal=schedule, random_state=0).fit(X)
    assert m.exact_lloyd_
    step = softkmeans.reference.centroid_step(X, m.cluster_centers_, kind="hard")
    np.testing.assert_allclose(step.centroids, m.cluster_centers_, rtol=1e-12, atol=1e-12)
    last = m.history_["sigma"][-1]
    assert last <= np.sqrt(m.min_margin_) / 2
    assert m.history_["kind"][-1] == "entmax15"
    assert len(m.history_["sigma"]) == m.n_iter_


def _blobs():
    """50 points around each corner of a square of side 6, noise 0.7."""
    corners = [[0.0, 0.0], [6.0, 0.0], [0.0, 6.0], [6.0, 6.0]]
    return make_blobs(200, 2, 4, seed=5, spread=0.7, centres=corners, balanced=True)[0]


def test_transitions_are_recorded_in_cooling_order():
    m = SoftKMeans(4, anneal={"cooling": 0.85}, random_state=0).fit(_blobs())
    tr = m.history_["transitions"]
    assert tr, "four separated blobs must split"
    sig = [t["sigma"] for t in tr]
    assert sig == sorted(sig, reverse=True)
    assert all(t["n_after"] > t["n_before"] for t in tr)
    assert tr[-1]["n_after"] == 4


def test_verbose_prints_one_line_per_temperature(capsys):
    sched = {"cooling": 0.5, "steps": 20}
    m = SoftKMeans(2, anneal=sched, random_state=0, verbose=1).fit(_blobs())
    lines = capsys.readouterr().out.strip().splitlines()
    n_widths = len(
        set(s for s, k in zip(m.history_["sigma"], m.history_["kind"]) if k == "softmax")
    )
    assert len(lines) == n_widths + 1  # one per width and one for the Lloyd finish
    assert all("sigma=" in ln for ln in lines)


def test_schedule_from_dict_true_and_object():
    assert check_schedule(None) is None and check_schedule(False) is None
    assert check_schedule(True) == AnnealingSchedule()
    assert check_schedule({"cooling": 0.5}).cooling == 0.5
    s = AnnealingSchedule(start=2.0, stop=0.5)
    assert check_schedule(s) is s
    assert s.resolve(10.0) == (2.0, 0.5)
    assert AnnealingSchedule().resolve(10.0) == (12.0, 0.5)


@pytest.mark.parametrize(
    ("spec", "exc", "match"),
    [
        ({"cooling": 1.0}, ValueError, "cooling"),
        ({"cooling": 0.0}, ValueError, "cooling"),
        ({"steps": 0}, ValueError, "steps"),
        ({"steps": 1.5}, TypeError, "steps"),
        ({"splits": 0}, ValueError, "splits"),
        ({"start": -1.0}, ValueError, "start"),
        ({"start": 1.0, "stop": 2.0}, ValueError, "stop"),
        ({"kind": "hard"}, ValueError, "kind"),
        ({"perturbation": 2.0}, ValueError, "perturbation"),
        ({"bogus": 1}, ValueError, "unknown anneal keys"),
        ("fast", TypeError, "anneal"),
    ],
)
def test_bad_schedules(spec, exc, match):
    with pytest.raises(exc, match=match):
        check_schedule(spec)


def test_annealing_beats_kmeans_plusplus_on_a_data_set_with_bad_local_minima():
    # 20 overlapping Gaussian clusters in 10-D packed into a small box: Lloyd from
    # k-means++ seeds often stops in a poor local minimum (several centroids sharing
    # one cluster, one centroid covering several); annealing splits clusters one
    # critical width at a time.
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(
        500, n_features=10, centers=20, cluster_std=1.0, center_box=(-6, 6), random_state=0
    )
    seeds = range(5)
    J_da = [
        SoftKMeans(20, assignment="hard", anneal=True, random_state=s).fit(X).inertia_
        for s in seeds
    ]
    J_pp = [SoftKMeans(20, assignment="hard", random_state=s).fit(X).inertia_ for s in seeds]
    assert np.mean(J_da) < 0.97 * np.mean(J_pp)
    assert sum(a <= b * (1 + 1e-9) for a, b in zip(J_da, J_pp)) >= 4


def test_priors_through_the_extra_coordinate_are_mass_constrained_responsibilities():
    # Oracle by hand: r_ij = p_j exp(-D_ij / (2 sigma^2)) / sum_l p_l exp(-D_il / (2 sigma^2)).
    from softkmeans.fit.annealing import _with_priors

    def _augment(X):
        return np.hstack([X, np.zeros((X.shape[0], 1))])

    rng = np.random.default_rng(7)
    X = rng.normal(size=(30, 3))
    C = rng.normal(size=(4, 3))
    p = np.array([0.1, 0.2, 0.3, 0.4])
    sigma = 0.8
    R = softkmeans.responsibilities(_augment(X), _with_priors(C, p, sigma, X.dtype), sigma)
    D = ((X[:, None, :] - C[None]) ** 2).sum(-1)
    E = p * np.exp(-D / (2 * sigma**2))
    np.testing.assert_allclose(R, E / E.sum(axis=1, keepdims=True), rtol=1e-10)


def test_float32_annealing_stays_float32_and_ends_at_lloyd():
    X = _blobs().astype(np.float32)
    schedule = {"cooling": 0.8, "kind": "entmax15"}
    m = SoftKMeans(4, assignment="entmax15", anneal=schedule, random_state=0).fit(X)
    assert m.cluster_centers_.dtype == np.float32
    assert m.exact_lloyd_
    # A Lloyd fixed point: the hard step keeps every label, and the centroids up to the
    # rounding of a differently ordered sum (SPEC.md: equal in exact arithmetic).
    step = softkmeans.centroid_step(X, m.cluster_centers_, kind="hard")
    np.testing.assert_array_equal(
        softkmeans.assign(X, step.centroids)[0], softkmeans.assign(X, m.cluster_centers_)[0]
    )
    np.testing.assert_allclose(step.centroids, m.cluster_centers_, rtol=1e-6, atol=1e-6)
