"""softkmeans.torch: the gradient in a sigma tensor (dF/dsigma = -4 sigma sum_i w_i H(r_i),
checked by finite differences of the objective itself) and the refusal of double backward."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import softkmeans.torch as skt  # noqa: E402


@pytest.fixture(params=["native", "torch"])
def path(request, monkeypatch):
    """The native path (CPU float64) or the plain-torch one (forced)."""
    if request.param == "torch":
        monkeypatch.setattr(skt, "_uses_native", lambda x: False)
    return request.param


def _data(seed=3):
    rng = np.random.default_rng(seed)
    X = torch.tensor(rng.normal(size=(14, 3)) * 2.0, dtype=torch.float64)
    C = torch.tensor(rng.normal(size=(3, 3)) * 2.0, dtype=torch.float64)
    w = np.linspace(0.5, 2.0, X.shape[0])
    return X, C, w


@pytest.mark.parametrize("kind", ["softmax", "entmax15"])
@pytest.mark.parametrize("sigma, reduction", [(0.8, "sum"), (2.5, "mean")])
def test_sigma_gradient_matches_finite_differences(path, kind, sigma, reduction):
    X, C, w = _data()
    s = torch.tensor(sigma, dtype=torch.float64, requires_grad=True)

    def f(s):
        return skt.free_energy(X, C, s, kind, sample_weight=w, reduction=reduction)

    assert torch.autograd.gradcheck(f, (s,), eps=1e-6, atol=1e-6)


def test_gradients_in_x_centroids_and_sigma_together():
    X, C, w = _data(4)
    X, C = X[:6], C[:2]
    s = torch.tensor(1.1, dtype=torch.float64, requires_grad=True)

    def f(x, c, s):
        return skt.free_energy(x, c, s, "softmax", sample_weight=w[:6])

    inputs = (X.clone().requires_grad_(), C.clone().requires_grad_(), s)
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6)


def test_sigma_gradient_is_minus_four_sigma_times_the_weighted_entropy():
    # Written from the definition here: softmax r, Shannon H.
    X, C, w = _data(5)
    sigma = 1.3
    s = torch.tensor(sigma, dtype=torch.float64, requires_grad=True)
    skt.free_energy(X, C, s, "softmax", sample_weight=w).backward()
    D = ((X[:, None, :] - C[None]) ** 2).sum(-1).numpy()
    z = -D / (2 * sigma**2)
    r = np.exp(z - z.max(1, keepdims=True))
    r /= r.sum(1, keepdims=True)
    H = -(r * np.log(r)).sum(1)
    np.testing.assert_allclose(float(s.grad), -4 * sigma * (w * H).sum(), rtol=1e-10)


def test_hard_has_a_zero_sigma_gradient_and_float32_keeps_shape_and_dtype(path):
    X, C, _ = _data()
    s = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    skt.free_energy(X, C, s, "hard").backward()
    assert float(s.grad) == 0.0
    s32 = torch.tensor([0.9], dtype=torch.float32, requires_grad=True)
    skt.free_energy(X.float(), C.float(), s32, "softmax").backward()
    assert s32.grad.shape == (1,) and s32.grad.dtype == torch.float32
    assert float(s32.grad) < 0  # more entropy is always rewarded: F falls as sigma grows


@pytest.mark.parametrize("kind", ["hard", "softmax", "entmax15"])
def test_double_backward_is_refused(path, kind):
    X, C, _ = _data()
    x = X.clone().requires_grad_()
    s = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    loss = skt.free_energy(x, C, s, kind)
    with pytest.raises(RuntimeError, match="double backward.*not supported"):
        torch.autograd.grad(loss, x, create_graph=True)
    # A plain backward still works.
    (g,) = torch.autograd.grad(skt.free_energy(x, C, 1.0, kind), x)
    assert torch.isfinite(g).all()
