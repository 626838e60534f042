"""Experiment 12: codebook usage of hard, softmax and entmax15 vector quantization.

From a deliberately poor start (the codes in a small cloud away from the data), the soft
assignments give every code some mass, so codes move toward the data and get used,
while hard VQ leaves the codes that are nearest to no point where they are. Several
seeds (the start's direction and cloud, the batch order): the check is that softmax and
entmax15 VQ end with more codes in use and a lower reconstruction error than hard VQ in
every seed. The reconstruction error and the histogram are computed in NumPy
(`softkmeans.experiments.oracle`) from the final codebooks.
"""

from __future__ import annotations

import numpy as np

from . import oracle as O
from ._common import FAIL, NOT_MET, PASS, Row, pyplot
from ._torch_common import _rows, _skt, _table, _torch
from ._util import subsample


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


def _probe(X, C, total_var):
    """(fraction of codes used, perplexity, reconstruction error / variance) by the oracle."""
    D = O.sq_distances(X, C)
    lab = O.labels(D)
    counts = np.bincount(lab, minlength=C.shape[0])
    p = counts / counts.sum()
    nz = p[p > 0]
    recon = float(D[np.arange(len(lab)), lab].mean()) / total_var
    return float((counts > 0).mean()), float(np.exp(-(nz * np.log(nz)).sum())), recon


def _one_seed(X, k, sc, ctx, ds_name, seed, epochs, batch):
    """Every quantizer from the same poor start (seed): per epoch (name, epoch, perplexity,
    fraction used, recon) and the final (fraction used, perplexity, recon) per name."""
    torch, skt = _torch(), _skt()
    rng = ctx.rng("torch12", ds_name, seed)
    away = rng.standard_normal(X.shape[1])
    away *= 3.0 * sc / np.linalg.norm(away)
    cloud = rng.standard_normal((k, X.shape[1])) * (0.5 * sc / np.sqrt(X.shape[1]))
    C0 = torch.tensor(X.mean(0) + away + cloud, dtype=torch.float32)
    x_all = torch.tensor(X, dtype=torch.float32)
    total_var = float(((X - X.mean(0)) ** 2).sum(1).mean())
    d = X.shape[1]
    contenders = {
        "hard": lambda: skt.VectorQuantizer(k, d, None, "hard", init=C0, momentum=0.9),
        "softmax": lambda: skt.VectorQuantizer(k, d, 0.5 * sc, "softmax", init=C0, momentum=0.9),
        "entmax15": lambda: skt.VectorQuantizer(k, d, 0.5 * sc, "entmax15", init=C0, momentum=0.9),
    }
    try:
        _vqpt_baseline(C0, d)
        contenders[BASELINE] = None
    except ImportError:
        pass
    trace, finals = [], {}
    for name, make in contenders.items():
        torch.manual_seed(ctx.seed + seed)
        if make is None:
            vq, codebook = _vqpt_baseline(C0, d)
            step = lambda xb, vq=vq: vq(xb[None])  # noqa: E731
        else:
            vq = make()
            codebook = lambda vq=vq: vq.codebook.detach()  # noqa: E731
            step = vq
        gen = torch.Generator().manual_seed(ctx.seed + seed)
        for epoch in range(epochs + 1):
            finals[name] = _probe(X, codebook().double().numpy(), total_var)
            trace.append((seed, name, epoch, *finals[name]))
            if epoch == epochs:
                break
            vq.train()
            for idx in torch.randperm(len(X), generator=gen).split(batch):
                step(x_all[idx])
    return trace, finals


def codebook_usage(ds, ctx):
    """Vector quantization of the data (k = 32 codes; 16 with --quick) from a deliberately
    poor start: the codes in a cloud of radius ~0.5 sigma_c centred 3 sigma_c from the
    data's mean (a random direction per seed), so that few codes are nearest to any point.
    Hard, softmax and entmax15 VectorQuantizer with the closed-form EMA update (momentum
    0.9, batches of 256), sigma = 0.5 sigma_c for the soft kinds; vector-quantize-pytorch's
    EMA VQ with dead-code replacement (threshold 2) from the same codebook when it is
    installed. Per seed (2 with --quick, 3) and epoch: perplexity, fraction of codes used
    (nearest-code histogram over the whole set) and reconstruction error
    mean ||x - c_a(x)||^2 / mean ||x - mean||^2."""
    X, _ = subsample(ds, ctx, _rows(ctx))
    k = 16 if ctx.quick else 32
    epochs, batch = (6 if ctx.quick else 20), 256
    seeds = range(2 if ctx.quick else 3)
    sc = float(np.sqrt(O.covariance_top(X)))
    trace, finals = [], {}
    for seed in seeds:
        t, finals[seed] = _one_seed(X, k, sc, ctx, ds.name, seed, epochs, batch)
        trace += t
    rows = []
    for name in ("softmax", "entmax15"):
        wins = [
            s
            for s in seeds
            if finals[s][name][0] > finals[s]["hard"][0]
            and finals[s][name][2] < finals[s]["hard"][2]
        ]
        per = "; ".join(
            f"seed {s}: used {finals[s][name][0]:.3g} vs {finals[s]['hard'][0]:.3g}, recon "
            f"{finals[s][name][2]:.3g} vs {finals[s]['hard'][2]:.3g}"
            for s in seeds
        )
        rows.append(
            Row(12, ds.name, k,
                f"{name} VQ: seeds where it uses more codes and reconstructs better than hard",
                len(wins), len(seeds), PASS if len(wins) == len(seeds) else FAIL, per)
        )  # fmt: skip
    rows.append(_baseline_row(ds.name, k, finals, seeds))
    _figure(ds, ctx, trace, k)
    head = ["seed", "quantizer", "epoch", "fraction used", "perplexity", "recon error / variance"]
    body = [[s, n, e, f"{u:.3g}", f"{p:.3g}", f"{r:.4g}"] for s, n, e, u, p, r in trace]
    return rows, [_table(ctx, "torch12_codebook_usage", ds, head, body)]


BASELINE = "vector-quantize-pytorch (dead-code replacement)"


def _baseline_row(ds_name, k, finals, seeds):
    """Its own row for the vector-quantize-pytorch baseline: softmax VQ uses at least as
    many codes as the dead-code replacement in every seed, or "not met" (with the reason)
    when the package is not installed, never silently absent."""
    q = f"softmax VQ vs {BASELINE}: seeds where it uses at least as many codes"
    if not any(BASELINE in finals[s] for s in seeds):
        why = "vector-quantize-pytorch is not installed (pip install vector-quantize-pytorch)"
        return Row(12, ds_name, k, q, float("nan"), len(seeds), NOT_MET, why)
    wins = [s for s in seeds if finals[s]["softmax"][0] >= finals[s][BASELINE][0]]
    per = "; ".join(
        f"seed {s}: used {finals[s]['softmax'][0]:.3g} vs {finals[s][BASELINE][0]:.3g}, recon "
        f"{finals[s]['softmax'][2]:.3g} vs {finals[s][BASELINE][2]:.3g}"
        for s in seeds
    )
    status = PASS if len(wins) == len(seeds) else FAIL
    return Row(12, ds_name, k, q, len(wins), len(seeds), status, per)


def _figure(ds, ctx, trace, k):
    plt = pyplot()
    path = ctx.figure_path(f"torch12_codebook_usage_{ds.name}")
    if plt is None or path is None:
        return
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    names = list(dict.fromkeys(t[1] for t in trace))
    for i, name in enumerate(names):
        for seed in sorted({t[0] for t in trace}):
            mine = [t for t in trace if t[1] == name and t[0] == seed]
            ep = [t[2] for t in mine]
            for ax, col in zip(axes, (4, 3, 5)):
                ax.plot(ep, [t[col] for t in mine], f"C{i}", alpha=0.8,
                        label=name if seed == 0 else None)  # fmt: skip
    labels = ("perplexity (codes)", "fraction of codes used", "recon error / variance")
    for ax, label in zip(axes, labels):
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=6)
    fig.suptitle(f"{ds.name}: codebook usage from a poor start (k = {k}; one line per seed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
