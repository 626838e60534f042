"""``softkmeans reproduce --torch``: the K-Means term in PyTorch, four measured effects.

9. Gradient norm vs sigma: dF/dx stays bounded away from 0 as sigma -> 0 and tends to the
   K-Means gradient 2 (x_i - c_a(i)); the part that flows only through the
   responsibilities vanishes.
10. Closed-form centroid update vs Adam and SGD on the same objective F_sigma.
11. Representation contraction: an encoder trained on the K-Means term at a fixed sigma
    shrinks its representations until sigma^2 > lambda_max, where the codebook collapses
    to the mean; a schedule keeping sigma^2 below lambda_max does not collapse.
12. Codebook usage of hard, softmax and entmax15 vector quantization from a poor start
    (with vector-quantize-pytorch's dead-code replacement as a baseline when installed).

Each experiment returns check rows (as the claims do: report.md, results.csv) and a
table of everything it measured (tables/<experiment>_<data set>.csv, appended to
report.md), and draws a figure. torch is imported when an experiment runs, never when
this module is imported.
"""

from __future__ import annotations

import csv
import time

import numpy as np

import softkmeans as sk

from ._common import FAIL, PASS, Row, pyplot
from ._util import kpp, subsample

DATASETS_QUICK = ("digits",)
DATASETS_FULL = ("digits", "mnist5k")
QUICK_BUDGET = 300  # iterations of experiment 10 with --quick
NOT_PRESENT = (
    "Fashion-MNIST is not run: no installable Python package ships it offline "
    "(see softkmeans.experiments.datasets)."
)


class Experiment:
    """What report.write needs of a claim module: NUMBER, TITLE, a docstring, run."""

    def __init__(self, number, title, fn):
        self.NUMBER, self.TITLE, self.run = number, title, fn
        self.__doc__ = fn.__doc__


def _torch():
    import torch

    return torch


def _skt():
    from softkmeans import torch as skt

    return skt


def _table(ctx, name, ds, head, body):
    """(title, head, body) for report.md; also written to tables/<name>_<ds>.csv."""
    if ctx.out_dir is not None:
        folder = ctx.out_dir / "tables"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{name}_{ds.name}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(head)
            writer.writerows(body)
    return (f"{name} on {ds.name}", head, body)


def _rows(ctx):
    """Rows of a data set an experiment uses at most (a seeded subsample beyond)."""
    return 1000 if ctx.quick else 5000


def _g(x):
    return "-" if x is None else (f"{x:.3g}" if isinstance(x, float) else str(x))


# ------------------------------------------------------------------ 9. gradient vs sigma


def gradient_norm(ds, ctx):
    """dF/dx vs sigma over 6.5 decades at k-means++ centroids (k = 10, float64): the full
    gradient of F_sigma (softmax) and G_sigma (entmax15) with respect to the
    representations, relative to the K-Means gradient K = 2 (x_i - c_a(i)), and the part
    that flows only through the responsibilities (d/dx of sum_ij r_ij(x) D_ij with D held
    fixed), which is what a loss built on r alone back-propagates."""
    torch, skt = _torch(), _skt()
    X, _ = subsample(ds, ctx, _rows(ctx))
    k = 10
    C = kpp(X, k, ctx, "torch9", ds.name)
    sc = sk.critical_sigma(X)
    # K with exact ties shared equally (the limit of both maps; digits has tied points).
    D = sk.sq_distances(X, C)
    nearest = D == D.min(axis=1, keepdims=True)
    K = 2.0 * (X - (nearest / nearest.sum(axis=1, keepdims=True)) @ C)
    k_norm = float(np.linalg.norm(K))
    ratios = 10.0 ** np.arange(-5.0, 1.51, 0.5)
    body, rows, curves = [], [], {}
    for kind in ("softmax", "entmax15"):
        full, dev, via_r = [], [], []
        for f in ratios:
            sigma = f * sc
            x = torch.tensor(X, requires_grad=True)
            skt.free_energy(x, torch.tensor(C), sigma, kind).backward()
            g = x.grad.numpy()
            xr = torch.tensor(X, requires_grad=True)
            r = skt.responsibilities(xr, torch.tensor(C), sigma, kind)
            D = torch.cdist(xr.detach(), torch.tensor(C)).square()
            (r * D).sum().backward()
            gr = xr.grad.numpy()
            full.append(float(np.linalg.norm(g)) / k_norm)
            dev.append(float(np.linalg.norm(g - K)) / k_norm)
            via_r.append(float(np.linalg.norm(gr)) / k_norm)
            body.append([kind, f"{f:.3g}", full[-1], dev[-1], via_r[-1]])
        curves[kind] = (full, dev, via_r)
        cold = ratios <= 0.1
        lowest = min(np.array(full)[cold])
        rows.append(
            Row(
                9,
                ds.name,
                k,
                f"{kind}: min ||dF/dx|| / ||K|| for sigma <= sigma_c / 10",
                lowest,
                0.5,
                PASS if lowest >= 0.5 else FAIL,
                f"K = 2 (x - c_a); sigma/sigma_c from {ratios[0]:g} to {ratios[-1]:g}",
            )
        )
        rows.append(
            Row(
                9,
                ds.name,
                k,
                f"{kind}: ||dF/dx - K|| / ||K|| at sigma = 1e-5 sigma_c",
                dev[0],
                1e-8,
                PASS if dev[0] <= 1e-8 else FAIL,
                "the data gradient tends to the K-Means gradient",
            )
        )
        peak = max(via_r)
        rows.append(
            Row(
                9,
                ds.name,
                k,
                f"{kind}: gradient through r only at 1e-5 sigma_c / its peak",
                via_r[0] / peak if peak > 0 else 0.0,
                1e-6,
                PASS if via_r[0] <= 1e-6 * peak else FAIL,
                f"peak {peak:.3g} ||K||; it vanishes as sigma -> 0",
            )
        )
    plt = pyplot()
    path = ctx.figure_path(f"torch9_gradient_norm_{ds.name}")
    if plt is not None and path is not None:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for kind, style in (("softmax", "-"), ("entmax15", "--")):
            full, dev, via_r = curves[kind]
            ax.loglog(ratios, full, "C0" + style, label=f"||dF/dx|| / ||K|| ({kind})")
            ax.loglog(ratios, np.maximum(dev, 1e-17), "C1" + style, label=f"||dF/dx - K|| ({kind})")
            ax.loglog(
                ratios, np.maximum(via_r, 1e-17), "C2" + style, label=f"through r only ({kind})"
            )
        ax.set_xlabel("sigma / sigma_c")
        ax.set_ylabel("relative to ||K|| = ||2 (x - c_a)||")
        ax.set_title(f"{ds.name}: gradient w.r.t. the representations")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
    head = ["kind", "sigma/sigma_c", "||dF/dx||/||K||", "||dF/dx-K||/||K||", "through r/||K||"]
    return rows, [_table(ctx, "torch9_gradient_norm", ds, head, body)]


# ----------------------------------------------------------- 10. closed form vs Adam/SGD


def update_rules(ds, ctx):
    """F_sigma (softmax, sigma = 0.3 sigma_c, k = 10) from the same k-means++ centroids:
    the closed-form step c <- S / N (no learning rate) vs Adam and SGD on the centroids
    at several learning rates (full batch, reduction "mean", the gradient from
    softkmeans.torch.free_energy). Target: 99.9% of the decrease F(C0) - F*, with F* the
    closed form's value after 300 steps; iterations and wall time to reach it (at most
    3000 points; a budget of 500 iterations, 300 with --quick)."""
    torch, skt = _torch(), _skt()
    X, _ = subsample(ds, ctx, min(_rows(ctx), 3000))
    k = 10
    sc = sk.critical_sigma(X)
    sigma = 0.3 * sc
    C0 = kpp(X, k, ctx, "torch10", ds.name)
    x = torch.tensor(X)
    W = float(X.shape[0])

    def F(C):
        return float(skt.free_energy(x, C, sigma, "softmax")) / W

    C = torch.tensor(C0)
    for _ in range(300):
        C, _ = skt.closed_form_update(x, C, sigma)
    f_star, f0 = F(C), F(torch.tensor(C0))
    target = f_star + 1e-3 * (f0 - f_star)
    budget = QUICK_BUDGET if ctx.quick else 500

    def closed_form():
        C = torch.tensor(C0)
        for it in range(1, budget + 1):
            C, _ = skt.closed_form_update(x, C, sigma)
            if F(C) <= target:
                return it, F(C)
        return None, F(C)

    def by_optimizer(make):
        # The loss of step `it` is F at the centroids of step it - 1: no extra pass.
        c = torch.tensor(C0, requires_grad=True)
        opt = make([c])
        for it in range(budget + 1):
            opt.zero_grad()
            loss = skt.free_energy(x, c, sigma, "softmax", reduction="mean")
            value = float(loss.detach())
            if not np.isfinite(value) or value <= target:
                return (it if np.isfinite(value) else None), value
            loss.backward()
            opt.step()
        return None, F(c.detach())

    runs = [("closed form", "-", closed_form)]
    for lr in (0.01, 0.1, 1.0):
        runs.append(
            (
                "Adam",
                f"{lr:g} sigma_c",
                lambda lr=lr: by_optimizer(lambda p: torch.optim.Adam(p, lr=lr * sc)),
            )
        )
    for lr in (0.05, 0.2, 1.0):
        runs.append(
            ("SGD", f"{lr:g}", lambda lr=lr: by_optimizer(lambda p: torch.optim.SGD(p, lr=lr)))
        )
    body, results = [], {}
    for name, lr, fn in runs:
        t0 = time.perf_counter()
        iters, value = fn()
        dt = time.perf_counter() - t0
        results[(name, lr)] = (iters, dt)
        gap = (value - f_star) / (f0 - f_star)
        body.append(
            [name, lr, _g(iters) if iters else f"not in {budget}", f"{dt:.3f}", f"{gap:.2e}"]
        )
    cf_iters, cf_time = results[("closed form", "-")]
    grad_iters = [it for (n, _), (it, _) in results.items() if n != "closed form" and it]
    best = min(grad_iters) if grad_iters else None
    ok = cf_iters is not None and (best is None or cf_iters < best)
    rows = [
        Row(
            10,
            ds.name,
            k,
            "iterations to 99.9% of the decrease: closed form / best of Adam, SGD",
            cf_iters or float("nan"),
            best or float("nan"),
            PASS if ok else FAIL,
            f"closed form {cf_iters} it in {cf_time:.2f} s; best gradient method "
            f"{best if best else f'none within {budget}'} it; sigma = 0.3 sigma_c, "
            f"{X.shape[0]} points",
        )
    ]
    head = ["method", "learning rate", "iterations", "wall time (s)", "final gap / initial gap"]
    return rows, [_table(ctx, "torch10_update_rules", ds, head, body)]


# -------------------------------------------------------- 11. representation contraction


def contraction(ds, ctx):
    """A small encoder (MLP d -> 64 -> 8) trained by Adam on the K-Means term alone
    (F_sigma, softmax, k = 8, the codebook moved by the closed-form step every batch)
    from the same start, two ways: sigma fixed at 0.5 sqrt(lambda_max) of the initial
    representations, and a schedule sigma = 0.5 sqrt(lambda_max) of the current
    representations (sigma^2 = lambda_max / 4 throughout). The term contracts the
    representations; per epoch: lambda_max, sigma^2 / lambda_max, the codebook's spread
    (max distance of a code to the codes' mean, over sqrt(lambda_max)), the codes in use
    and their perplexity. Theory: once sigma^2 > lambda_max all codes sit at the mean."""
    torch, skt = _torch(), _skt()
    X, _ = subsample(ds, ctx, _rows(ctx))
    Xs = (X - X.mean(0)) / (X.std(0).mean() + 1e-12)
    k, epochs, batch = 8, (12 if ctx.quick else 40), 256
    x_all = torch.tensor(Xs, dtype=torch.float32)
    body, rows, curves = [], [], {}
    for mode in ("fixed", "schedule"):
        torch.manual_seed(ctx.seed)
        enc = torch.nn.Sequential(
            torch.nn.Linear(X.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)
        )
        with torch.no_grad():
            z0 = enc(x_all)
        lam0 = skt.critical_sigma(z0) ** 2
        init = z0[torch.tensor(ctx.rng("torch11", ds.name).choice(len(Xs), k, replace=False))]
        loss_fn = skt.SoftKMeansLoss(k, 8, sigma=0.5 * np.sqrt(lam0), kind="softmax", init=init)
        opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
        gen = torch.Generator().manual_seed(ctx.seed)
        crossing, trace = None, []
        for epoch in range(epochs + 1):
            with torch.no_grad():
                z = enc(x_all)
            lam = skt.critical_sigma(z) ** 2
            codes = skt.VectorQuantizer(k, 8, init=loss_fn.centroids.detach()).eval()(z)
            cb = loss_fn.centroids.detach()
            spread = float((cb - cb.mean(0)).norm(dim=1).max()) / max(np.sqrt(lam), 1e-300)
            ratio = loss_fn.sigma**2 / lam if lam > 0 else float("inf")
            if crossing is None and ratio > 1.0:
                crossing = epoch
            trace.append((lam, ratio, spread, codes.usage * k, codes.perplexity))
            body.append(
                [
                    mode,
                    epoch,
                    f"{lam:.3e}",
                    f"{ratio:.3g}",
                    f"{spread:.3g}",
                    int(round(codes.usage * k)),
                    f"{codes.perplexity:.3g}",
                ]
            )
            if epoch == epochs:
                break
            for idx in torch.randperm(len(Xs), generator=gen).split(batch):
                zb = enc(x_all[idx])
                if mode == "schedule":
                    loss_fn.sigma = 0.5 * skt.critical_sigma(zb.detach())
                loss = loss_fn(zb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                loss_fn.closed_form_step(zb.detach(), momentum=0.5)
        curves[mode] = (trace, crossing)
    fixed_trace, crossing = curves["fixed"]
    sched_trace, sched_cross = curves["schedule"]
    collapsed = fixed_trace[-1][2] < 1e-2
    rows.append(
        Row(
            11,
            ds.name,
            k,
            "fixed sigma: epoch where sigma^2 crosses lambda_max",
            float("nan") if crossing is None else crossing,
            float("nan"),
            PASS if crossing is not None else FAIL,
            f"lambda_max {fixed_trace[0][0]:.3g} -> {fixed_trace[-1][0]:.3g} over {epochs} epochs",
        )
    )
    rows.append(
        Row(
            11,
            ds.name,
            k,
            "fixed sigma: codebook spread / sqrt(lambda_max) at the end",
            fixed_trace[-1][2],
            1e-2,
            PASS if (crossing is None) != collapsed else FAIL,
            f"codes in use {fixed_trace[-1][3]:.0f} of {k}; collapse to the mean "
            "predicted after the crossing",
        )
    )
    rows.append(
        Row(
            11,
            ds.name,
            k,
            "schedule sigma^2 = lambda_max / 4: codes in use at the end",
            sched_trace[-1][3],
            k / 2,
            PASS if sched_cross is None and sched_trace[-1][3] >= k / 2 else FAIL,
            f"spread {sched_trace[-1][2]:.3g}; perplexity {sched_trace[-1][4]:.3g}",
        )
    )
    plt = pyplot()
    path = ctx.figure_path(f"torch11_contraction_{ds.name}")
    if plt is not None and path is not None:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
        for mode, color in (("fixed", "C3"), ("schedule", "C0")):
            trace, cross = curves[mode]
            ep = np.arange(len(trace))
            axes[0].semilogy(ep, [t[1] for t in trace], color, label=f"sigma^2/lambda_max ({mode})")
            axes[1].plot(ep, [t[3] for t in trace], color, label=f"codes in use ({mode})")
            if cross is not None:
                axes[0].axvline(cross, color=color, ls=":")
        axes[0].axhline(1.0, color="k", lw=0.8)
        axes[0].set_xlabel("epoch")
        axes[1].set_xlabel("epoch")
        axes[0].legend(fontsize=7)
        axes[1].legend(fontsize=7)
        fig.suptitle(f"{ds.name}: representation contraction under the K-Means term")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
    head = [
        "sigma",
        "epoch",
        "lambda_max",
        "sigma^2/lambda_max",
        "spread",
        "codes used",
        "perplexity",
    ]
    return rows, [_table(ctx, "torch11_contraction", ds, head, body)]


# ---------------------------------------------------------------- 12. codebook usage


def _vqpt_baseline(C0, dim):
    """vector-quantize-pytorch's EMA VQ with dead-code replacement, codebook set to C0."""
    torch = _torch()
    from vector_quantize_pytorch import VectorQuantize

    vq = VectorQuantize(
        dim=dim, codebook_size=C0.shape[0], decay=0.9, threshold_ema_dead_code=2, kmeans_init=False
    )
    with torch.no_grad():
        vq._codebook.embed.copy_(C0[None])
        vq._codebook.embed_avg.copy_(C0[None])
    return vq, lambda: vq._codebook.embed[0].detach()


def codebook_usage(ds, ctx):
    """Vector quantization of the data (k = 32 codes; 16 with --quick) from a deliberately
    poor start: the codes in a cloud of radius ~0.5 sigma_c centred 3 sigma_c from the
    data's mean (a random direction), so that few codes are nearest to any point. Hard,
    softmax and entmax15 VectorQuantizer with the closed-form EMA update (momentum 0.9,
    batches of 256), sigma = 0.5 sigma_c for the soft kinds; vector-quantize-pytorch's EMA VQ with
    dead-code replacement (threshold 2) from the same codebook when it is installed. Per
    epoch: perplexity and fraction of codes used (nearest-code histogram over the whole
    set) and reconstruction error mean ||x - c_a(x)||^2 / mean ||x - mean||^2."""
    torch, skt = _torch(), _skt()
    X, _ = subsample(ds, ctx, _rows(ctx))
    k = 16 if ctx.quick else 32
    epochs, batch = (6 if ctx.quick else 20), 256
    rng = ctx.rng("torch12", ds.name)
    sc = sk.critical_sigma(X)
    away = rng.standard_normal(X.shape[1])
    away *= 3.0 * sc / np.linalg.norm(away)
    cloud = rng.standard_normal((k, X.shape[1])) * (0.5 * sc / np.sqrt(X.shape[1]))
    C0 = torch.tensor(X.mean(0) + away + cloud, dtype=torch.float32)
    x_all = torch.tensor(X, dtype=torch.float32)
    total_var = float(((X - X.mean(0)) ** 2).sum(1).mean())
    contenders = {
        "hard": lambda: skt.VectorQuantizer(k, X.shape[1], None, "hard", init=C0, momentum=0.9),
        "softmax": lambda: skt.VectorQuantizer(
            k, X.shape[1], 0.5 * sc, "softmax", init=C0, momentum=0.9
        ),
        "entmax15": lambda: skt.VectorQuantizer(
            k, X.shape[1], 0.5 * sc, "entmax15", init=C0, momentum=0.9
        ),
    }
    note = ""
    try:
        _vqpt_baseline(C0, X.shape[1])
        contenders["vector-quantize-pytorch (dead-code replacement)"] = None
    except ImportError:
        note = "vector-quantize-pytorch not installed: baseline skipped"
    body, finals = [], {}
    for name in contenders:
        torch.manual_seed(ctx.seed)
        if contenders[name] is None:
            vq, codebook = _vqpt_baseline(C0, X.shape[1])
            step = lambda xb, vq=vq: vq(xb[None])  # noqa: E731
        else:
            vq = contenders[name]()
            codebook = lambda vq=vq: vq.codebook.detach()  # noqa: E731
            step = vq
        gen = torch.Generator().manual_seed(ctx.seed)
        for epoch in range(epochs + 1):
            probe = skt.VectorQuantizer(k, X.shape[1], init=codebook().float()).eval()(x_all)
            recon = float(((x_all - probe.quantized) ** 2).sum(1).mean()) / total_var
            body.append(
                [name, epoch, f"{probe.perplexity:.3g}", f"{probe.usage:.3g}", f"{recon:.4g}"]
            )
            if epoch == epochs:
                break
            vq.train()
            for idx in torch.randperm(len(X), generator=gen).split(batch):
                step(x_all[idx])
        finals[name] = (probe.usage, probe.perplexity, recon)
    rows = []
    for name in ("softmax", "entmax15"):
        better = finals[name][0] > finals["hard"][0] and finals[name][2] < finals["hard"][2]
        rows.append(
            Row(
                12,
                ds.name,
                k,
                f"{name} VQ: fraction of codes used at the end (vs hard)",
                finals[name][0],
                finals["hard"][0],
                PASS if better else FAIL,
                f"recon {finals[name][2]:.3g} vs hard {finals['hard'][2]:.3g}; "
                f"perplexity {finals[name][1]:.3g} vs {finals['hard'][1]:.3g}",
            )
        )
    if note:
        rows[-1].note += "; " + note
    plt = pyplot()
    path = ctx.figure_path(f"torch12_codebook_usage_{ds.name}")
    if plt is not None and path is not None:
        fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
        for i, name in enumerate(contenders):
            mine = [b for b in body if b[0] == name]
            ep = [b[1] for b in mine]
            for ax, col in zip(axes, (2, 3, 4)):
                ax.plot(ep, [float(b[col]) for b in mine], f"C{i}", label=name)
        for ax, label in zip(axes, ("perplexity", "fraction of codes used", "recon error / var")):
            ax.set_xlabel("epoch")
            ax.set_title(label)
        axes[0].legend(fontsize=6)
        fig.suptitle(f"{ds.name}: codebook usage from a poor start (k = {k})")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
    head = ["quantizer", "epoch", "perplexity", "fraction used", "recon error / variance"]
    return rows, [_table(ctx, "torch12_codebook_usage", ds, head, body)]


EXPERIMENTS = {
    9: Experiment(9, "PyTorch: gradient norm vs sigma", gradient_norm),
    10: Experiment(10, "PyTorch: closed-form update vs Adam and SGD", update_rules),
    11: Experiment(11, "PyTorch: representation contraction and the critical sigma", contraction),
    12: Experiment(12, "PyTorch: codebook usage of hard, softmax and entmax15 VQ", codebook_usage),
}


def run_torch(
    quick, out_dir, datasets=None, experiments=None, progress=print, seed=0, threads=None
):
    """Run the PyTorch experiments; write report.md, results.csv, tables/ and figures/.

    threads: OpenMP threads of the native core and torch's intra-op threads (None: their
    defaults).
    """
    from . import _thread_limit

    torch = _torch()  # a clear ImportError before anything runs
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        with _thread_limit(threads):
            return _run_torch(quick, out_dir, datasets, experiments, progress, seed)
    finally:
        torch.set_num_threads(before)


def _run_torch(quick, out_dir, datasets, experiments, progress, seed):
    from . import report, start

    say = progress if progress is not None else (lambda line: None)
    names = list(datasets) if datasets else list(DATASETS_QUICK if quick else DATASETS_FULL)
    if experiments:
        unknown = sorted(set(experiments) - set(EXPERIMENTS))
        if unknown:
            raise ValueError(f"unknown experiment(s) {unknown}; known: {sorted(EXPERIMENTS)}")
    chosen = {n: e for n, e in EXPERIMENTS.items() if not experiments or n in set(experiments)}
    t_start = time.perf_counter()
    ctx, loaded = start(quick, out_dir, names, seed, say)
    out_dir = ctx.out_dir
    rows, tables, timings = [], [], {}
    for number, exp in sorted(chosen.items()):
        for ds in loaded:
            t0 = time.perf_counter()
            got, tabs = exp.run(ds, ctx)
            timings[(number, ds.name)] = time.perf_counter() - t0
            n_pass = sum(r.status == PASS for r in got)
            say(
                f"experiment {number} ({exp.TITLE}) on {ds.name}: {n_pass}/{len(got)} PASS "
                f"[{timings[(number, ds.name)]:.1f} s]"
            )
            rows += got
            tables += tabs
    elapsed = time.perf_counter() - t_start
    if out_dir is not None:
        report.write(
            out_dir, rows, loaded, chosen, quick=quick, elapsed=elapsed, timings=timings, seed=seed
        )
        lines = ["", "## Tables of the PyTorch experiments", "", NOT_PRESENT, ""]
        for title, head, body in tables:
            lines += [f"### {title}", ""]
            lines += report._table(head, [[_g(c) for c in row] for row in body])
            lines.append("")
        with open(out_dir / "report.md", "a", encoding="utf-8") as f:
            f.write("\n".join(lines))
    return rows, tables
