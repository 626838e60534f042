"""Balanced (size-constrained) K-Means (SPEC.md, "Balanced (size-constrained) assignments").

The oracle is `softkmeans.reference`: the hard assignment as the linear program of the
definition (HiGHS), the soft one by float64 Sinkhorn. The native path (candidates pass,
auction, Sinkhorn over [X, 0]) is compared with it over dtypes, input kinds and thread
counts; the sizes, the capacities and the offsets are checked against their definitions.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import DTYPES, THREAD_COUNTS, TOLERANCE, make_blobs
from softkmeans import SoftKMeans, reference, sources
from softkmeans._balance import check_targets, integer_targets
from softkmeans.fit import balanced, balanced_repair
from softkmeans.fit.balanced import BalancedProblem


def _unequal_blobs(n, d, k, seed=0, dtype=np.float64):
    """Blobs of very unequal sizes: an unconstrained fit is far from balanced."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d)) * 4
    p = np.arange(1, k + 1, dtype=float) ** 2
    labels = rng.choice(k, size=n, p=p / p.sum())
    X = centres[labels] + rng.normal(size=(n, d))
    return X.astype(dtype), X[rng.choice(n, k, replace=False)].astype(dtype)


def _as_kind(X, kind):
    if kind == "csr":
        return sp.csr_matrix(X)
    if kind == "fortran":
        return np.asfortranarray(X)
    return X


def _native_assignment(X, C, n_threads, **targets):
    source = sources.source_of(X)
    source.n_threads = n_threads
    w = source.weights
    spec = check_targets(
        targets.get("balance"), targets.get("max_cluster_size"), C.shape[0], w.size,
        float(w.sum()), True,
    )  # fmt: skip
    labels, offsets, own = BalancedProblem(source, spec).solve(C, offsets=True)
    return labels, offsets, float(own.sum())


TARGETS = [
    {"balance": "equal"},
    {"balance": [6.0, 12.0, 18.0, 24.0]},
    {"max_cluster_size": 18},
]


@pytest.mark.parametrize("targets", TARGETS, ids=["equal", "masses", "capacities"])
@pytest.mark.parametrize("kind", ["array", "fortran", "csr"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_threads", THREAD_COUNTS)
def test_hard_assignment_matches_the_linear_program(targets, kind, dtype, n_threads):
    X, C = _unequal_blobs(60, 3, 4, dtype=dtype)
    labels, offsets, cost = _native_assignment(_as_kind(X, kind), C, n_threads, **targets)
    R, _ = reference.balanced_assignment(X, C, **targets)
    D = reference.sq_distances(X.astype(np.float64), C.astype(np.float64))
    optimum = float((R * D).sum())
    assert cost == pytest.approx(optimum, rel=TOLERANCE[np.dtype(dtype)])
    counts = np.bincount(labels, minlength=4)
    if "max_cluster_size" in targets:
        assert counts.max() <= 18
    else:
        assert np.array_equal(counts, R.sum(axis=0).round().astype(int))
    if dtype == np.float64:  # a unique optimum: the same rows, and offsets that give them
        assert np.array_equal(labels, R.argmax(axis=1))
        assert np.array_equal(np.argmin(D - offsets, axis=1), labels)


def test_integer_targets_are_within_one_of_the_masses():
    masses = np.array([10.4, 10.4, 10.4, 30.8])
    t = integer_targets(masses, 62)
    assert t.sum() == 62 and (np.abs(t - masses) < 1).all()
    assert np.array_equal(t, [11, 10, 10, 31])  # the largest fraction (0.8) first, then j=0


@pytest.mark.parametrize("masses", [None, [0.1, 0.2, 0.3, 0.15, 0.25]])
def test_hard_fit_counts_within_one_of_target(masses):
    X, _ = _unequal_blobs(103, 4, 5, seed=1)
    balance = "equal" if masses is None else np.array(masses) * 103
    model = SoftKMeans(5, assignment="hard", balance=balance, random_state=0).fit(X)
    counts = np.bincount(model.labels_, minlength=5)
    target = np.full(5, 103 / 5) if masses is None else np.array(masses) * 103
    assert counts.sum() == 103
    assert (np.abs(counts - target) < 1).all(), (counts, target)
    # The offsets reproduce the labels (predict on the training data) and are 0 at max.
    assert np.array_equal(model.predict(X), model.labels_)
    assert model.balance_offsets_.max() == 0.0
    assert not model.exact_lloyd_


def test_hard_fit_objective_never_increases():
    X, _ = _unequal_blobs(400, 3, 6, seed=2)
    model = SoftKMeans(6, assignment="hard", balance="equal", random_state=0, tol=0).fit(X)
    J = model.history_["J"]
    assert len(J) >= 3
    assert (np.diff(J) <= 1e-9 * J[0]).all()
    # Balancing costs distortion: the unconstrained fit from the same start is lower.
    plain = SoftKMeans(6, assignment="hard", random_state=0, tol=0).fit(X)
    assert plain.inertia_ < model.inertia_


def test_capacities_cap_the_largest_cluster():
    n, k = 600, 6
    X, _ = _unequal_blobs(n, 3, k, seed=3)
    cap = int(np.ceil(1.05 * n / k))
    model = SoftKMeans(k, assignment="hard", max_cluster_size=cap, random_state=0).fit(X)
    counts = np.bincount(model.labels_, minlength=k)
    assert counts.max() <= cap and counts.max() / counts.mean() <= 1.05
    g = model.balance_offsets_
    assert (g <= 0).all() and (g[counts < cap] == 0).all()
    assert np.array_equal(model.predict(X), model.labels_)


def test_masses_with_weights():
    X, _ = _unequal_blobs(300, 3, 4, seed=4)
    w = np.random.default_rng(0).integers(1, 4, size=300).astype(float)
    W = w.sum()
    masses = np.array([0.1, 0.2, 0.3, 0.4]) * W
    model = SoftKMeans(4, assignment="hard", balance=masses, random_state=0)
    model.fit(X, sample_weight=w)
    N = np.bincount(model.labels_, weights=w, minlength=4)
    # NOTE in BalancedProblem: rows are not split; each N_j at most one weight above.
    assert N.sum() == pytest.approx(W)
    assert (N <= masses + w.max() + 1e-9).all()
    assert (N >= masses - 3 * w.max()).all()


def test_weighted_inertia_is_the_weighted_cost_of_the_labels():
    # The fit's J: sum_i w_i ||x_i - c_label_i||^2 at the final centroids, here against
    # NumPy in float64 (weights: the auction's path).
    X, _ = _unequal_blobs(300, 3, 4, seed=5)
    w = np.random.default_rng(1).uniform(0.5, 3.0, size=300)
    model = SoftKMeans(4, assignment="hard", balance="equal", random_state=0)
    model.fit(X, sample_weight=w)
    diff = X - model.cluster_centers_[model.labels_]
    cost = float(w @ np.einsum("ij,ij->i", diff, diff))
    assert model.inertia_ == pytest.approx(cost, rel=1e-9)


@pytest.mark.parametrize("targets", [{"balance": "equal"}, {"max_cluster_size": 90}])
def test_soft_masses_hold_and_match_the_reference(targets):
    X, _ = _unequal_blobs(300, 3, 4, seed=5)
    model = SoftKMeans(4, assignment="softmax", sigma=1.0, random_state=0, **targets).fit(X)
    R = model.predict_proba(X)
    N = R.sum(axis=0)
    if "balance" in targets:
        assert N == pytest.approx(np.full(4, 75.0), rel=1e-5)
    else:
        assert (N <= 90 * (1 + 1e-5)).all()
    R_ref, g_ref = reference.balanced_responsibilities(X, model.cluster_centers_, 1.0, **targets)
    assert np.abs(R - R_ref).max() < 1e-4
    assert np.abs(model.balance_offsets_ - g_ref).max() < 1e-3 * np.abs(g_ref).max() + 1e-6


@pytest.mark.parametrize("assignment", ["hard", "softmax"])
def test_bitwise_across_thread_counts(assignment):
    X, _ = _unequal_blobs(2000, 8, 7, seed=6, dtype=np.float32)
    fits = [
        SoftKMeans(
            7, assignment=assignment, balance="equal", n_threads=t, random_state=0, max_iter=10
        ).fit(X)  # fmt: skip
        for t in THREAD_COUNTS
    ]
    for other in fits[1:]:
        assert np.array_equal(other.cluster_centers_, fits[0].cluster_centers_)
        assert np.array_equal(other.labels_, fits[0].labels_)
        assert np.array_equal(other.balance_offsets_, fits[0].balance_offsets_)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"balance": [1.0, 2.0, 3.0]}, "balance masses must sum"),
        ({"balance": [30.0, 30.0, 40.0, 0.0]}, "balance must have n_clusters=3"),
        ({"balance": [50.0, 60.0, -10.0]}, "balance must be finite and > 0"),
        ({"balance": "even"}, "balance must be None, 'equal'"),
        ({"max_cluster_size": 30}, "max_cluster_size allows 90"),
        ({"max_cluster_size": [40, 40, 0]}, "max_cluster_size must be finite and > 0"),
        ({"balance": "equal", "max_cluster_size": 50}, "not both"),
        ({"balance": "equal", "assignment": "entmax15"}, "entmax15"),
        ({"balance": "equal", "anneal": True}, "anneal"),
    ],
)
def test_bad_balance_parameters(kwargs, match):
    X, _ = _unequal_blobs(100, 2, 3)
    kwargs.setdefault("assignment", "hard")
    with pytest.raises(ValueError, match=match):
        SoftKMeans(3, **kwargs).fit(X)


def test_partial_fit_refuses_balance():
    X, _ = _unequal_blobs(100, 2, 3)
    with pytest.raises(ValueError, match="partial_fit does not balance"):
        SoftKMeans(3, balance="equal").partial_fit(X)


def test_blobs_fixture_is_balanced_already():
    # make_blobs(balanced=True) is the easy case: balancing changes nothing there.
    X, C = make_blobs(120, 3, 4, balanced=True, seed=7, spread=0.2, centre_scale=10.0)
    plain = SoftKMeans(4, assignment="hard", init=C, n_init=1).fit(X)
    bal = SoftKMeans(4, assignment="hard", init=C, n_init=1, balance="equal").fit(X)
    assert np.bincount(plain.labels_).tolist() == [30] * 4
    assert np.array_equal(plain.labels_, bal.labels_)


@pytest.mark.parametrize("targets", TARGETS, ids=["equal", "masses", "capacities"])
def test_few_candidates_and_no_slack_rows_match_the_linear_program(monkeypatch, targets):
    # 2 candidates of 4 clusters: rows widen when the next distance says so; capacities
    # then run without slack rows (prices of clusters with room held at 0).
    monkeypatch.setattr(balanced, "M_CANDIDATES", 2)
    X, C = _unequal_blobs(60, 3, 4, seed=8)
    labels, offsets, cost = _native_assignment(X, C, 1, **targets)
    R, _ = reference.balanced_assignment(X, C, **targets)
    D = reference.sq_distances(X, C)
    assert cost == pytest.approx(float((R * D).sum()), rel=1e-10)
    assert np.array_equal(labels, R.argmax(axis=1))
    assert np.array_equal(np.argmin(D - offsets, axis=1), labels)


@pytest.mark.parametrize("assignment", ["hard", "softmax"])
def test_balanced_cosine_keeps_unit_centroids(assignment):
    # The balanced step is the metric's: with metric="cosine" c_j = S_j / ||S_j|| (a merge
    # of the two models once took S_j / N_j here, off the sphere).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5)) + 3.0
    model = SoftKMeans(
        4, assignment=assignment, sigma=0.2, metric="cosine", balance="equal", random_state=0
    ).fit(X)
    np.testing.assert_allclose(np.linalg.norm(model.cluster_centers_, axis=1), 1.0, rtol=1e-12)
    if assignment == "hard":
        np.testing.assert_array_equal(np.bincount(model.labels_, minlength=4), [75] * 4)


def test_balanced_refuses_auto_sigma():
    X = np.random.default_rng(1).normal(size=(40, 2))
    with pytest.raises(ValueError, match="sigma='auto' does not combine with balance"):
        SoftKMeans(2, assignment="softmax", sigma="auto", balance="equal").fit(X)


@pytest.mark.parametrize("rows_per_move, band", [(1, 0.0), (4, 1.0)])
@pytest.mark.parametrize("targets", TARGETS[:2], ids=["equal", "masses"])
def test_warm_solves_along_moving_centroids_match_the_linear_program(
    monkeypatch, rows_per_move, band, targets
):
    # Integer counts take `CountsRepair` (softkmeans.fit.balanced_repair): from the last
    # offsets, only the rows near a tie move, then complementary slackness is checked on
    # all rows (a retry with more rows when it fails; band 0: too few rows at first, so
    # the retries run). Every solve along a path of centroids must be the optimum of the
    # linear program at those centroids.
    monkeypatch.setattr(balanced_repair, "ROWS_PER_MOVE", rows_per_move)
    monkeypatch.setattr(balanced_repair, "BAND_FACTOR", band)
    used = []
    counts = balanced._native.balanced_counts

    def recording(*args):
        out = counts(*args)
        used.append(out[4])
        return out

    monkeypatch.setattr(balanced._native, "balanced_counts", recording)
    X, C = _unequal_blobs(300, 3, 4, seed=9)
    balance = targets["balance"]
    balance = balance if isinstance(balance, str) else np.array(balance) * 5  # W = 300
    targets = {"balance": balance}
    spec = check_targets(balance, None, 4, 300, 300.0, True)
    problem = BalancedProblem(sources.source_of(X), spec)
    drift = np.random.default_rng(1).normal(size=C.shape)
    for t in range(6):
        Ct = C + 0.1 * t * drift
        labels, offsets, own = problem.solve(Ct)
        R, _ = reference.balanced_assignment(X, Ct, **targets)
        D = reference.sq_distances(X, Ct)
        assert own.sum() == pytest.approx(float((R * D).sum()), rel=1e-12), t
        assert np.array_equal(labels, R.argmax(axis=1)), t
    assert min(used[1:]) < 150, used  # the warm solves moved only some rows


@pytest.mark.parametrize("edges_per_row", [1, 3])
@pytest.mark.parametrize("seed", range(4))
def test_counts_kernel_from_wrong_offsets_is_the_optimum(seed, edges_per_row):
    # `balanced_counts` from offsets far from the optimum's, letting few rows move at first
    # (rows_per_move 2, band 0), each through its edges_per_row best moves: the check on
    # every row must catch a wrong restricted solve. Integer distances; the oracle is the
    # assignment problem with each cluster expanded into its target count of slots
    # (scipy's linear_sum_assignment).
    from scipy.optimize import linear_sum_assignment

    rng = np.random.default_rng(seed)
    n, k = 200, 4
    D = rng.integers(0, 50, size=(n, k)).astype(np.float64)
    targets = np.array([30, 40, 60, 70])
    g = rng.normal(scale=5.0, size=k)
    status, owner, g_out, _, _ = balanced._native.balanced_counts(
        D, targets, g, np.full(n, -1), 2, 0.0, edges_per_row, 1e-9, balanced.TRANSFER_TRIES
    )
    assert status == 0
    assert np.array_equal(np.bincount(owner, minlength=k), targets)
    slots = np.repeat(np.arange(k), targets)
    rows, cols = linear_sum_assignment(D[:, slots])
    assert D[np.arange(n), owner].sum() == D[rows, slots[cols]].sum()
    value = D - g_out
    assert (value[np.arange(n), owner] <= value.min(axis=1) + 1e-9).all()


@pytest.mark.parametrize("assignment", ["hard", "softmax"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_balanced_fit_is_bitwise_the_same_at_every_simd_level(assignment, dtype):
    # With the parity tests against the linear program (at the default level), the same
    # bytes at every level give the parity at every level.
    from softkmeans import _native

    X, _ = make_blobs(600, 5, 4, dtype=dtype, seed=3)
    before = _native.selected_simd_level()
    fits = {}
    try:
        for level in _native.available_simd_levels():
            _native.set_simd_level(level)
            model = SoftKMeans(
                4, assignment=assignment, sigma=0.5, balance="equal", random_state=0, max_iter=8
            ).fit(X)
            fits[level] = (model.labels_.tobytes(), model.cluster_centers_.tobytes())
    finally:
        _native.set_simd_level(before)
    assert len(set(fits.values())) == 1, sorted(fits)
