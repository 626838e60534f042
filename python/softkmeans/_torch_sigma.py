"""softkmeans.torch's gradient in sigma, and its refusal of double backward.

By the envelope theorem (r held at its optimum, SPEC.md "Gradients"), the objective
F_sigma = sum_i w_i (sum_j r_ij D_ij - 2 sigma^2 H(r_i)) has

    dF/dsigma = -4 sigma sum_i w_i H(r_i),

with H the Shannon entropy -sum_j r_ij log r_ij for softmax and the Tsallis-1.5 entropy
(4/3) (1 - sum_j r_ij^(3/2)) for entmax15 (the entropy each map maximizes; SPEC.md
"Objectives"); "hard" does not depend on sigma. It costs one (n, k) matrix of
responsibilities, made only when sigma requires grad.

The gradients of softkmeans.torch are the envelope's first derivatives, with r held
fixed: differentiating them again would leave out dr/dx, dr/dc and dr/dsigma and give a
wrong Hessian silently, so a double backward (create_graph=True) raises instead.
"""

from __future__ import annotations

import torch

__all__ = ["ObjectiveOutput", "entropy_sum", "with_sigma_gradient"]

DOUBLE_BACKWARD = (
    "softkmeans.torch.free_energy: double backward (create_graph=True, higher-order "
    "gradients) is not supported: its gradients hold the responsibilities fixed (the "
    "envelope theorem), so their own derivatives would be wrong"
)


def entropy_sum(r, kind, w):
    """sum_i w_i H(r_i) (a float) for responsibilities r (n, k) of `kind`."""
    r = r.detach().double()
    w = torch.as_tensor(w, dtype=torch.float64, device=r.device)
    if kind == "softmax":
        H = -torch.where(r > 0, r * torch.log(r), torch.zeros_like(r)).sum(dim=1)
    else:
        H = (4.0 / 3.0) * (1.0 - (r * r.sqrt()).sum(dim=1))
    return float((w * H).sum())


class ObjectiveOutput(torch.autograd.Function):
    """The objective passed through (a copy): adds dF/dsigma to a sigma tensor, and
    refuses a double backward through any of the objective's gradients."""

    @staticmethod
    def forward(ctx, value, sigma, dF_dsigma):
        ctx.dF_dsigma = dF_dsigma
        ctx.sigma_like = (sigma.shape, sigma.dtype) if sigma is not None else None
        return value.clone()

    @staticmethod
    def backward(ctx, grad_output):
        if torch.is_grad_enabled():  # create_graph=True
            raise RuntimeError(DOUBLE_BACKWARD)
        grad_sigma = None
        if ctx.needs_input_grad[1]:
            shape, dtype = ctx.sigma_like
            grad_sigma = (grad_output * ctx.dF_dsigma).reshape(shape).to(dtype)
        return grad_output, grad_sigma, None


def with_sigma_gradient(out, sigma_in, sigma, kind, w, responsibilities):
    """The objective `out` with dF/dsigma for a sigma tensor that requires grad, and no
    double backward; responsibilities() gives r (n, k), called only when needed."""
    wants_sigma = isinstance(sigma_in, torch.Tensor) and sigma_in.requires_grad
    if not (torch.is_grad_enabled() and (out.requires_grad or wants_sigma)):
        return out
    dF = 0.0  # hard does not depend on sigma
    if wants_sigma and kind != "hard":
        dF = -4.0 * sigma * entropy_sum(responsibilities(), kind, w)
    return ObjectiveOutput.apply(out, sigma_in if wants_sigma else None, dF)
