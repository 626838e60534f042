"""Experiment 11: representation contraction and the critical sigma.

Theory (claim 3, SPEC.md "Critical temperature"): for sigma^2 > lambda_max of the
representations, all codes at their mean is a strict local minimizer of F_sigma, so a
codebook trained by the closed-form step collapses there once sigma^2 crosses lambda_max,
and not while sigma^2 stays below it. An encoder (MLP d -> 64 -> 8) trained by Adam, three
ways from the same start: the K-Means term alone at a fixed sigma (the term contracts the
representations, so the crossing is expected), the same with a reconstruction loss beside
it (a decoder 8 -> 64 -> d; the reconstruction resists the contraction, so whether
sigma^2 crosses is not known in advance: on digits it does not), the same with the
K-Means term weighted x1000 against the reconstruction (the crossing under a task loss;
"not met" when it does not cross), and a schedule sigma^2 = lambda_max / 4 of the
current batch. The check in every mode: the codebook collapsed (spread < 1e-2
sqrt(lambda_max)) exactly when sigma^2 crossed lambda_max (at some epoch, by the oracle's
covariance of the representations; a crossing fewer than SETTLE epochs before the end is
"not met": the codebook needs a few epochs to follow). lambda_max, the spread and the
codes in use are computed in NumPy from the representations
(`softkmeans.experiments.oracle`).
"""

from __future__ import annotations

import numpy as np

from . import oracle as O
from ._common import FAIL, NOT_MET, PASS, Row, pyplot
from ._torch_common import _rows, _skt, _table, _torch
from ._util import subsample

CRITICAL = 1.0  # the crossing is sigma^2 > CRITICAL x lambda_max (1: the claim)
COLLAPSED = 1e-2  # spread / sqrt(lambda_max) below which the codebook sits at the mean
TASK = "fixed + reconstruction, K-Means term x1000"
MODES = ("fixed", "fixed + reconstruction", TASK, "schedule")
# The K-Means term's weight beside the reconstruction (1 unless named): x1000 makes the
# contraction win over the task loss, so that the crossing is shown under a task loss.
TERM_WEIGHT = {TASK: 1000.0}
# The codebook follows a crossing within a few epochs (3 to 4 on blobs and digits): a
# crossing fewer than SETTLE epochs before the end cannot be judged ("not met").
SETTLE = 4


def _codes(z, C):
    """(codes in use, perplexity) of the nearest-code histogram (oracle distances)."""
    counts = np.bincount(O.labels(O.sq_distances(z, C)), minlength=C.shape[0])
    p = counts / counts.sum()
    nz = p[p > 0]
    return int((counts > 0).sum()), float(np.exp(-(nz * np.log(nz)).sum()))


def _train(mode, Xs, k, epochs, batch, ctx, ds_name):
    """One training run: the per-epoch trace (lambda_max, sigma^2 / lambda_max, spread,
    codes in use, perplexity) and the first epoch where sigma^2 > CRITICAL lambda_max."""
    torch, skt = _torch(), _skt()
    torch.manual_seed(ctx.seed)
    d = Xs.shape[1]
    enc = torch.nn.Sequential(torch.nn.Linear(d, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    dec = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, d))
    x_all = torch.tensor(Xs, dtype=torch.float32)
    with torch.no_grad():
        z0 = enc(x_all)
    lam0 = O.covariance_top(z0.numpy().astype(np.float64))
    init = z0[torch.tensor(ctx.rng("torch11", ds_name).choice(len(Xs), k, replace=False))]
    loss_fn = skt.SoftKMeansLoss(k, 8, sigma=0.5 * np.sqrt(lam0), kind="softmax", init=init)
    params = list(enc.parameters()) + (list(dec.parameters()) if "reconstruction" in mode else [])
    opt = torch.optim.Adam(params, lr=1e-3)
    gen = torch.Generator().manual_seed(ctx.seed)
    crossing, trace = None, []
    for epoch in range(epochs + 1):
        with torch.no_grad():
            z = enc(x_all).numpy().astype(np.float64)
        lam = O.covariance_top(z)
        cb = loss_fn.centroids.detach().numpy().astype(np.float64)
        spread = float(np.linalg.norm(cb - cb.mean(0), axis=1).max()) / max(np.sqrt(lam), 1e-300)
        ratio = loss_fn.sigma**2 / lam if lam > 0 else float("inf")
        if crossing is None and ratio > CRITICAL:
            crossing = epoch
        trace.append((lam, ratio, spread, *_codes(z, cb)))
        if epoch == epochs:
            break
        for idx in torch.randperm(len(Xs), generator=gen).split(batch):
            zb = enc(x_all[idx])
            if mode == "schedule":
                zz = zb.detach().numpy().astype(np.float64)
                loss_fn.sigma = 0.5 * float(np.sqrt(O.covariance_top(zz)))
            loss = TERM_WEIGHT.get(mode, 1.0) * loss_fn(zb)
            if "reconstruction" in mode:
                loss = loss + ((dec(zb) - x_all[idx]) ** 2).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_fn.closed_form_step(zb.detach(), momentum=0.5)
    return trace, crossing


def contraction(ds, ctx):
    """A small encoder trained with the K-Means term (softmax, k = 8, the codebook moved by
    the closed-form step every batch) at a fixed sigma = 0.5 sqrt(lambda_max) of the
    initial representations, alone and beside a reconstruction loss, and with the
    schedule sigma^2 = lambda_max / 4. Per epoch: lambda_max, sigma^2 / lambda_max, the
    codebook's spread (max distance of a code to the codes' mean, over sqrt(lambda_max)),
    the codes in use and their perplexity. Theory: the codebook collapses to the mean
    exactly when sigma^2 has crossed lambda_max."""
    X, _ = subsample(ds, ctx, _rows(ctx))
    Xs = (X - X.mean(0)) / (X.std(0).mean() + 1e-12)
    k, epochs, batch = 8, (12 if ctx.quick else 40), 256
    body, rows, curves = [], [], {}
    for mode in MODES:
        trace, crossing = _train(mode, Xs, k, epochs, batch, ctx, ds.name)
        curves[mode] = (trace, crossing)
        for epoch, t in enumerate(trace):
            body.append(
                [mode, epoch, f"{t[0]:.3e}", f"{t[1]:.3g}", f"{t[2]:.3g}", t[3], f"{t[4]:.3g}"]
            )
        collapsed = trace[-1][2] < COLLAPSED
        crossed = crossing is not None
        status = PASS if crossed == collapsed else FAIL
        if mode == TASK and not crossed and not collapsed:
            status = NOT_MET  # the crossing under a task loss is what this mode is for
        if crossed and not collapsed and crossing > epochs - SETTLE:
            status = NOT_MET  # crossed too late for the codebook to follow
        rows.append(
            Row(11, ds.name, k,
                f"{mode}: codebook spread / sqrt(lambda_max) at the end (collapse iff crossing)",
                trace[-1][2], COLLAPSED, status,
                f"sigma^2 crossed {CRITICAL:g} lambda_max: "
                + (f"at epoch {crossing}" if crossed else "never")
                + f"; collapsed: {collapsed}; lambda_max {trace[0][0]:.3g} -> {trace[-1][0]:.3g} "
                f"over {epochs} epochs; codes in use {trace[-1][3]} of {k}")
        )  # fmt: skip
    sched = curves["schedule"][0][-1]
    rows.append(
        Row(11, ds.name, k, "schedule sigma^2 = lambda_max / 4: codes in use at the end",
            sched[3], k / 2, PASS if sched[3] >= k / 2 else FAIL,
            f"spread {sched[2]:.3g}; perplexity {sched[4]:.3g}")
    )  # fmt: skip
    _figure(ds, ctx, curves)
    head = [
        "mode",
        "epoch",
        "lambda_max",
        "sigma^2/lambda_max",
        "spread",
        "codes used",
        "perplexity",
    ]
    return rows, [_table(ctx, "torch11_contraction", ds, head, body)]


def _figure(ds, ctx, curves):
    plt = pyplot()
    path = ctx.figure_path(f"torch11_contraction_{ds.name}")
    if plt is None or path is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for mode, color in zip(MODES, ("C3", "C2", "C1", "C0")):
        trace, cross = curves[mode]
        ep = np.arange(len(trace))
        axes[0].semilogy(ep, [t[1] for t in trace], color, label=mode)
        axes[1].plot(ep, [t[3] for t in trace], color, label=mode)
        if cross is not None:
            axes[0].axvline(cross, color=color, ls=":")
    axes[0].axhline(CRITICAL, color="k", lw=0.8, label="sigma^2 = lambda_max")
    axes[0].set_ylabel("sigma^2 / lambda_max  (dimensionless)")
    axes[1].set_ylabel("codes in use (of 8)")
    for ax in axes:
        ax.set_xlabel("epoch")
        ax.legend(fontsize=7)
    fig.suptitle(f"{ds.name}: representation contraction under the K-Means term")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
