"""softkmeans.torch: gradients (gradcheck and SPEC.md's formulas), native vs pure-torch
parity, bad input, extreme temperatures, the closed-form update, the loss module and the
vector quantizer (including the data-parallel all-reduce)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import softkmeans as sk  # noqa: E402
from conftest import KINDS, TOLERANCE, make_blobs  # noqa: E402
from softkmeans import _stats, reference  # noqa: E402
from softkmeans import torch as skt  # noqa: E402

TORCH_DTYPES = {np.float32: torch.float32, np.float64: torch.float64}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One OpenMP and one torch thread: these tests are tiny, and on a shared machine a
    second thread mostly waits at barriers (thread counts are tested in test_parity)."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1, user_api="openmp"):
        yield
    torch.set_num_threads(before)


def _pair(n=120, d=4, k=5, dtype=np.float64, seed=0, **kw):
    X, C = make_blobs(n, d, k, dtype=dtype, seed=seed, **kw)
    return X, C


def _t(a, grad=False):
    return torch.tensor(a).requires_grad_(grad)


def _energy_and_grads(path, X, C, sigma, kind, w=None, dtype=None):
    """(value, grad_x, grad_c) as float64 NumPy from the native or the pure-torch path."""
    x = torch.tensor(X, dtype=dtype).requires_grad_()
    c = torch.tensor(C, dtype=dtype).requires_grad_()
    if path == "native":
        f = skt.free_energy(x, c, sigma, kind, sample_weight=w)
    else:
        weights = np.ones(X.shape[0]) if w is None else w
        f = skt._torch_free_energy(x, c, sigma, kind, weights)
    f.backward()
    return float(f.detach()), x.grad.double().numpy(), c.grad.double().numpy()


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


# ------------------------------------------------------------------------------ gradcheck


def _gradcheck_data(kind):
    """Small, well-separated data: no ties (hard) and, for entmax15, every entry of u - tau
    far from 0 so that the finite-difference steps do not change a support."""
    X, C = _pair(n=12, d=3, k=3, seed=3)
    sigma = 1.5
    if kind == "entmax15":
        D = reference.sq_distances(X, C)
        z = -(D - D.min(1, keepdims=True)) / (2 * sigma**2)
        r = reference.entmax15(z)
        u = z / 2
        tau = u[np.arange(len(u)), r.argmax(1)] - np.sqrt(r.max(1))
        assert np.min(np.abs(u - tau[:, None])) > 1e-3
    return X, C, sigma


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", ["native", "torch"])
def test_gradcheck_float64(kind, path):
    X, C, sigma = _gradcheck_data(kind)
    w = np.linspace(0.5, 2.0, X.shape[0])

    if path == "native":

        def f(x, c):
            return skt.free_energy(x, c, sigma, kind, sample_weight=w)

    else:

        def f(x, c):
            return skt._torch_free_energy(x, c, sigma, kind, w)

    assert torch.autograd.gradcheck(f, (_t(X, True), _t(C, True)), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["softmax", "entmax15"])
def test_responsibilities_gradcheck_float64(kind):
    X, C, sigma = _gradcheck_data(kind)
    assert torch.autograd.gradcheck(
        lambda x, c: skt.responsibilities(x, c, sigma, kind),
        (_t(X, True), _t(C, True)),
        eps=1e-6,
        atol=1e-6,
    )


# --------------------------------------------------------------- values, gradients, parity


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["native", "torch"])
def test_matches_the_float64_reference(kind, dtype, path):
    # Both paths against the NumPy reference's objective and SPEC.md's gradients,
    # weighted, to SPEC.md's tolerance (float32 against the float64 reference).
    X, C = _pair(dtype=dtype, offset=30.0)
    w = np.random.default_rng(1).uniform(0.0, 3.0, size=X.shape[0])
    sigma = 0.4 * sk.critical_sigma(X)
    f, gx, gc = _energy_and_grads(path, X, C, sigma, kind, w, TORCH_DTYPES[dtype])
    X64, C64 = X.astype(np.float64), C.astype(np.float64)
    ref = reference.objective(X64, C64, sigma, kind=kind, sample_weight=w)
    ref_gx, ref_gc = reference.gradients(X64, C64, sigma, kind=kind, sample_weight=w)
    tol = TOLERANCE[np.dtype(dtype)]
    assert abs(f - ref) <= tol * abs(ref)
    # Gradients are differences (x - sum r c): compare relative to the data's scale.
    scale = 2.0 * w[:, None] * (np.abs(X64) + np.abs(C64).max())
    assert np.max(np.abs(gx - ref_gx) / scale) <= tol
    assert _rel(gc, ref_gc) <= tol * 50  # N c - S cancels at offset 30


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_and_torch_paths_agree(kind, dtype):
    X, C = _pair(n=300, d=6, k=7, dtype=dtype, seed=5)
    sigma = 0.3 * sk.critical_sigma(X)
    a = _energy_and_grads("native", X, C, sigma, kind, dtype=TORCH_DTYPES[dtype])
    b = _energy_and_grads("torch", X, C, sigma, kind, dtype=TORCH_DTYPES[dtype])
    tol = 2 * TOLERANCE[np.dtype(dtype)]
    assert abs(a[0] - b[0]) <= tol * abs(b[0])
    assert _rel(a[1], b[1]) <= tol * 10
    assert _rel(a[2], b[2]) <= tol * 10


def test_gradient_formulas_by_hand():
    # One point, two centroids, softmax: dF/dx = 2 (x - r1 c1 - r2 c2), dF/dc_j = 2 r_j (c_j - x).
    x = torch.tensor([[0.3, -0.2]], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([[0.0, 0.0], [1.0, 0.5]], dtype=torch.float64, requires_grad=True)
    sigma = 0.7
    skt.free_energy(x, c, sigma, "softmax").backward()
    D = ((x.detach() - c.detach()) ** 2).sum(1)
    r = torch.softmax(-D / (2 * sigma**2), 0)
    expect_gx = 2 * (x.detach()[0] - (r[:, None] * c.detach()).sum(0))
    expect_gc = 2 * r[:, None] * (c.detach() - x.detach()[0])
    np.testing.assert_allclose(x.grad[0].numpy(), expect_gx.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c.grad.numpy(), expect_gc.numpy(), rtol=1e-10, atol=1e-12)


def test_reduction_mean_divides_by_the_total_weight():
    X, C = _pair()
    w = np.random.default_rng(2).uniform(0.1, 2.0, size=X.shape[0])
    total = skt.free_energy(_t(X), _t(C), 0.8, "entmax15", sample_weight=w)
    mean = skt.free_energy(_t(X), _t(C), 0.8, "entmax15", sample_weight=torch.tensor(w),
                           reduction="mean")  # fmt: skip
    assert float(mean) == pytest.approx(float(total) / w.sum(), rel=1e-14)


def test_backward_scales_by_the_upstream_gradient():
    X, C = _pair()
    x, c = _t(X, True), _t(C, True)
    (3.0 * skt.free_energy(x, c, 0.8)).backward()
    gx, gc = sk.gradients(X, C, 0.8)
    np.testing.assert_allclose(x.grad.numpy(), 3 * gx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c.grad.numpy(), 3 * gc, rtol=1e-12, atol=1e-9)


def test_only_the_inputs_that_need_it_get_a_gradient():
    X, C = _pair()
    x, c = _t(X, True), _t(C, False)
    skt.free_energy(x, c, 0.8).backward()
    assert x.grad is not None and c.grad is None
    f = skt.free_energy(_t(X), _t(C), 0.8)
    assert not f.requires_grad


def test_native_path_reads_contiguous_tensors_without_a_copy(monkeypatch):
    X, C = _pair()
    x = _t(X)
    seen = []
    real = skt._native.block_stats

    def spy(Xa, *args, **kw):
        seen.append(Xa)
        return real(Xa, *args, **kw)

    monkeypatch.setattr(skt._native, "block_stats", spy)
    skt.free_energy(x, _t(C), 0.8)
    assert np.shares_memory(seen[0], x.numpy())
    # A non-contiguous view is copied once and gives the same value.
    xs = _t(np.concatenate([X, X], axis=1))[:, : X.shape[1]]
    assert not xs.is_contiguous()
    assert float(skt.free_energy(xs, _t(C), 0.8)) == pytest.approx(
        sk.objective(np.ascontiguousarray(X), C, 0.8), rel=1e-12
    )


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
def test_half_precision_is_computed_in_float32(half):
    X, C = _pair(n=64, d=3, k=4)
    x = torch.tensor(X, dtype=half, requires_grad=True)
    c = torch.tensor(C, dtype=half, requires_grad=True)
    f = skt.free_energy(x, c, 1.0, "softmax")
    assert f.dtype == torch.float32
    f.backward()
    assert x.grad.dtype == half and torch.isfinite(x.grad.float()).all()
    X16, C16 = x.detach().double().numpy(), c.detach().double().numpy()
    assert float(f.detach()) == pytest.approx(sk.objective(X16, C16, 1.0), rel=1e-5)


def test_centroids_take_the_dtype_of_the_data():
    X, C = _pair()
    c = torch.tensor(C, dtype=torch.float32, requires_grad=True)
    f = skt.free_energy(_t(X), c, 0.8)
    f.backward()
    assert f.dtype == torch.float64 and c.grad.dtype == torch.float32


# ------------------------------------------------------------------------------ bad input


def _numpy_error(**changes):
    args = {"X": np.ones((4, 3)), "C": np.zeros((2, 3)), "sigma": 1.0, "kind": "softmax"}
    args.update(changes)
    with pytest.raises((ValueError, TypeError)) as info:
        sk.objective(args["X"], args["C"], args["sigma"], kind=args["kind"])
    return info.type, str(info.value)


@pytest.mark.parametrize(
    "change",
    [
        {"sigma": 0.0},
        {"sigma": -1.0},
        {"sigma": float("nan")},
        {"sigma": None},
        {"kind": "gumbel"},
        {"sigma": "1"},
    ],  # fmt: skip
)
def test_bad_parameters_raise_the_numpy_api_errors(change):
    kind_of, message = _numpy_error(**change)
    args = {"sigma": 1.0, "kind": "softmax", **change}
    with pytest.raises(kind_of) as info:
        skt.free_energy(torch.ones(4, 3), torch.zeros(2, 3), args["sigma"], args["kind"])
    assert str(info.value) == message


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("which", ["x", "centroids"])
def test_nan_and_inf_are_refused(bad, which):
    x, c = torch.ones(4, 3), torch.zeros(2, 3)
    (x if which == "x" else c)[1, 2] = bad
    with pytest.raises(ValueError, match=f"^{which} contains NaN or infinity"):
        skt.free_energy(x, c, 1.0)
    with pytest.raises(ValueError, match="contains NaN or infinity"):
        sk.objective(x.numpy(), c.numpy(), 1.0)


def test_mismatched_dims_and_shapes_are_refused():
    _, message = _numpy_error(C=np.zeros((2, 4)))
    with pytest.raises(ValueError) as info:
        skt.free_energy(torch.ones(4, 3), torch.zeros(2, 4), 1.0)
    # The same message in the torch API's own names (x, centroids; issue 36 item 16).
    assert str(info.value).replace("centroids", "C").replace("x has", "X has") == message
    with pytest.raises(ValueError, match="must be 2-dimensional"):
        skt.free_energy(torch.ones(4), torch.zeros(2, 4), 1.0)
    with pytest.raises(ValueError, match="must not be empty"):
        skt.free_energy(torch.ones(0, 3), torch.zeros(2, 3), 1.0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.complex64])
def test_non_float_tensors_are_a_type_error(dtype):
    with pytest.raises(TypeError, match="x must be a real floating-point tensor"):
        skt.free_energy(torch.ones(4, 3, dtype=dtype), torch.zeros(2, 3), 1.0)
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        skt.free_energy(np.ones((4, 3)), torch.zeros(2, 3), 1.0)


def test_bad_weights_reduction_and_momentum():
    x, c = torch.ones(4, 3), torch.zeros(2, 3)
    with pytest.raises(ValueError, match="sample_weight must be non-negative"):
        skt.free_energy(x, c, 1.0, sample_weight=torch.tensor([1.0, -1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="sample_weight has 3 entries but X has 4 rows"):
        skt.free_energy(x, c, 1.0, sample_weight=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="reduction must be one of"):
        skt.free_energy(x, c, 1.0, reduction="max")
    with pytest.raises(ValueError, match="momentum must be in"):
        skt.closed_form_update(x, c, 1.0, momentum=1.0)
    with pytest.raises(ValueError, match="squared distances would overflow float32"):
        skt.free_energy(torch.full((4, 3), 1e30), c, 1.0)


# ---------------------------------------------------------------- extreme temperatures


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["native", "torch"])
def test_tiny_sigma_and_a_point_on_a_centroid_give_finite_kmeans_gradients(kind, dtype, path):
    X, C = _pair(n=50, d=3, k=4, dtype=dtype)
    X[0] = C[2]  # a point exactly on a centroid
    scale = float(np.sqrt(np.mean(np.var(X.astype(np.float64), axis=0))))
    for sigma in (1e-12 * scale, 1e12 * scale):
        f, gx, gc = _energy_and_grads(path, X, C, sigma, kind, dtype=TORCH_DTYPES[dtype])
        assert np.isfinite(f) and np.isfinite(gx).all() and np.isfinite(gc).all()
    # Cold: the data gradient is the K-Means gradient 2 (x_i - c_a(i)); it does not vanish.
    labels, _ = reference.assign(X, C)
    kmeans = 2 * (X.astype(np.float64) - C.astype(np.float64)[labels])
    assert np.all(gx[0] == 0.0) or kind != "hard"
    _, gx_cold, _ = _energy_and_grads(path, X, C, 1e-12 * scale, kind, dtype=TORCH_DTYPES[dtype])
    np.testing.assert_allclose(gx_cold, kmeans, rtol=0, atol=TOLERANCE[np.dtype(dtype)] * 100)
    assert np.linalg.norm(gx_cold) > 0.1 * np.linalg.norm(kmeans)


# --------------------------------------------------------------- the closed-form update


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", ["native", "torch"])
def test_closed_form_update_is_the_centroid_step(kind, path, monkeypatch):
    X, C = _pair(seed=7)
    w = np.random.default_rng(3).uniform(0.5, 1.5, size=X.shape[0])
    if path == "torch":
        monkeypatch.setattr(skt, "_uses_native", lambda x: False)
    new_C, counts = skt.closed_form_update(_t(X), _t(C), 0.9, kind, sample_weight=w)
    step = reference.centroid_step(X, C, 0.9, kind=kind, sample_weight=w)
    np.testing.assert_allclose(new_C.numpy(), step.centroids, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(counts.numpy(), step.cluster_weights, rtol=1e-10)


def test_closed_form_update_running_mean_and_ema():
    X, C = _pair(n=200, seed=8)
    first, second = X[:120], X[120:]
    C1, counts = skt.closed_form_update(_t(first), _t(C), 0.9)
    C2, counts = skt.closed_form_update(_t(second), C1, 0.9, counts=counts)
    stats, _, _ = sk._native.block_stats(second, C1.numpy(), "softmax", 0.9, np.ones(80), 0)
    expect, totals = _stats.running_update(
        C1.numpy(), skt.closed_form_update(_t(first), _t(C), 0.9)[1].numpy(), stats
    )
    np.testing.assert_allclose(C2.numpy(), expect, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(counts.numpy(), totals, rtol=1e-12)
    # EMA: c <- m c + (1 - m) S / N for touched clusters.
    m = 0.8
    E, _ = skt.closed_form_update(_t(second), C1, 0.9, momentum=m)
    batch = reference.centroid_step(second, C1.numpy(), 0.9).centroids
    np.testing.assert_allclose(E.numpy(), m * C1.numpy() + (1 - m) * batch, rtol=1e-12, atol=1e-12)


def test_untouched_clusters_stay_where_they_are():
    X = torch.tensor([[0.0, 0.0], [0.1, 0.0]], dtype=torch.float64)
    C = torch.tensor([[0.0, 0.1], [100.0, 100.0]], dtype=torch.float64)
    new_C, counts = skt.closed_form_update(X, C, kind="hard")
    assert torch.equal(new_C[1], C[1]) and counts[1] == 0
    np.testing.assert_allclose(new_C[0].numpy(), [0.05, 0.0])


class _FakeGroup:
    """Two ranks in two threads: all_reduce sums a tensor in place over both ranks."""

    def __init__(self, ranks=2):
        self.barrier = threading.Barrier(ranks)
        self.slots = [None] * ranks
        self.calls = 0

    def hook(self, rank):
        def all_reduce(t):
            self.slots[rank] = t.clone()
            self.barrier.wait()
            total = sum(self.slots)
            self.barrier.wait()
            self.calls += 1
            t.copy_(total)

        return all_reduce


@pytest.mark.parametrize("kind", KINDS)
def test_all_reduce_gives_every_rank_the_full_batch_codebook(kind):
    X, C = _pair(n=240, d=3, k=6, dtype=np.float32, seed=11)
    shards = [X[:100], X[100:]]
    group = _FakeGroup()
    sigma = None if kind == "hard" else 1.2
    vqs = [
        skt.VectorQuantizer(6, 3, sigma, kind, init=torch.tensor(C), all_reduce=group.hook(r))
        for r in range(2)
    ]
    full = skt.VectorQuantizer(6, 3, sigma, kind, init=torch.tensor(C))
    for _ in range(3):
        threads = [
            threading.Thread(target=vqs[r], args=(torch.tensor(shards[r]),)) for r in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        full(torch.tensor(X))
    assert group.calls == 6
    assert torch.equal(vqs[0].codebook, vqs[1].codebook)
    np.testing.assert_allclose(
        vqs[0].codebook.detach().numpy(), full.codebook.detach().numpy(), rtol=1e-5, atol=1e-5
    )


# ------------------------------------------------------------------ SoftKMeansLoss, VQ


def test_soft_kmeans_loss_module():
    X, C = _pair(seed=4)
    loss_fn = skt.SoftKMeansLoss(5, 4, sigma=0.9, kind="entmax15", init=torch.tensor(C))
    assert loss_fn.critical_sigma is None
    x = _t(X)
    loss = loss_fn(x)
    assert float(loss.detach()) == pytest.approx(sk.objective(X, C, 0.9, kind="entmax15") / len(X))
    assert loss_fn.critical_sigma == pytest.approx(sk.critical_sigma(X), rel=1e-12)
    loss.backward()
    np.testing.assert_allclose(
        loss_fn.centroids.grad.numpy(),
        sk.gradients(X, C, 0.9, kind="entmax15")[1] / len(X),
        rtol=1e-10,
        atol=1e-12,
    )
    loss_fn.closed_form_step(x)
    step = sk.centroid_step(X, C, 0.9, kind="entmax15")
    np.testing.assert_allclose(loss_fn.centroids.detach().numpy(), step.centroids, rtol=1e-12)
    # By gradient: the loss goes down.
    before = float(loss_fn(x).detach())
    for _ in range(5):
        loss_fn.centroids.grad = None
        loss_fn(x).backward()
        with torch.no_grad():
            loss_fn.centroids -= 0.05 * loss_fn.centroids.grad
    assert float(loss_fn(x).detach()) < before


def test_hard_vq_is_straight_through():
    X, C = _pair(n=30, d=3, k=4)
    vq = skt.VectorQuantizer(4, 3, init=torch.tensor(C))
    vq.eval()
    x = torch.tensor(X.reshape(5, 6, 3), requires_grad=True)
    out = vq(x)
    labels, _ = reference.assign(X, C)
    assert out.codes.shape == (5, 6) and out.quantized.shape == (5, 6, 3)
    np.testing.assert_array_equal(out.codes.reshape(-1).numpy(), labels)
    np.testing.assert_allclose(out.quantized.detach().reshape(-1, 3).numpy(), C[labels])
    out.quantized.sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))
    # eval mode: the codebook does not move.
    assert torch.equal(vq.codebook.detach(), torch.tensor(C))


def test_soft_vq_quantizes_by_responsibilities_and_reports_usage():
    X = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
    C = np.array([[0.0, 0.0], [5.0, 5.0], [-9.0, 9.0], [9.0, -9.0]])
    vq = skt.VectorQuantizer(4, 2, sigma=0.5, kind="softmax", init=torch.tensor(C))
    vq.eval()
    out = vq(torch.tensor(X))
    r = reference.responsibilities(X, C, 0.5)
    np.testing.assert_allclose(out.quantized.numpy(), r @ C, rtol=1e-12)
    assert out.usage == 0.5 and out.perplexity == pytest.approx(2.0)
    x = torch.tensor(X, requires_grad=True)
    vq(x).loss.backward()
    assert torch.isfinite(x.grad).all()


def test_soft_vq_revives_codes_that_hard_vq_leaves_dead():
    # Every code starts in one corner, far from most of the data: hard VQ moves the one
    # nearest code and leaves the others without a vector; softmax spreads them.
    rng = np.random.default_rng(0)
    X = torch.tensor(np.concatenate([rng.normal(m, 0.3, size=(100, 2)) for m in (0, 4, 8)]))
    C = torch.tensor(rng.normal(-3.0, 0.05, size=(6, 2)))
    usage = {}
    for kind, sigma in (("hard", None), ("softmax", 2.0)):
        vq = skt.VectorQuantizer(6, 2, sigma, kind, init=C, momentum=0.5)
        for _ in range(20):
            out = vq(X)
        usage[kind] = out.usage
    assert usage["hard"] <= 1 / 3 and usage["softmax"] >= 0.5


def test_gradient_vq_trains_its_codebook():
    X, C = _pair(n=60, d=3, k=4)
    vq = skt.VectorQuantizer(4, 3, 1.0, "entmax15", update="gradient", init=torch.tensor(C))
    x = torch.tensor(X, requires_grad=True)
    vq(x).loss.backward()
    assert vq.codebook.grad is not None and torch.isfinite(vq.codebook.grad).all()
    with pytest.raises(ValueError, match="update must be"):
        skt.VectorQuantizer(4, 3, update="sgd")
    with pytest.raises(ValueError, match="last axis of 3"):
        vq(torch.ones(2, 5))


def test_critical_sigma_matches_the_numpy_api():
    X, _ = _pair(dtype=np.float32)
    w = np.random.default_rng(0).uniform(0.0, 1.0, size=X.shape[0])
    expect = sk.critical_sigma(X, sample_weight=w)
    assert skt.critical_sigma(torch.tensor(X), w) == pytest.approx(expect, rel=1e-6)
    half = torch.tensor(X).to(torch.bfloat16)
    assert skt.critical_sigma(half, w) == pytest.approx(
        sk.critical_sigma(half.double().numpy(), sample_weight=w), rel=1e-10
    )
