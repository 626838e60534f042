"""Claim 7: the soft trajectories follow Lloyd's from the same init while Lloyd's path
keeps a margin.

From the k-means++ centroids C_0, Lloyd's path C_0, ..., C_L (to its fixed point, capped)
has the smallest margin Delta_path = min_t Delta_min(C_t) at step t_min. With the same
init and the same number of steps:

- entmax15 at sigma <= sqrt(Delta_path) / 2 = sigma_e makes every step one-hot (SPEC.md,
  Exact recovery), so its iterates are Lloyd's, bit for bit (checked at 0.999 sigma_e);
  at 1.001 sigma_e the first iterate that moves off Lloyd's is the one after the first
  step whose margin is below 4 sigma^2 (predicted exactly from the path's margins);
- softmax leaks mass exp(-Delta_i / (2 sigma^2)) at every step, so its iterates S_t
  drift from C_t; the partition of S_t is Lloyd's as long as the drift stays below the
  margin radius R_t = min_i (sqrt(D_i(2)) - sqrt(D_i(1))) / 2 at C_t (moving every
  centroid by less than R_t cannot change any point's nearest centroid). On a grid of
  sigma the largest sigma keeping the partition at every step (sigma_part) is measured
  and checked against the sigma up to which that certificate holds (sigma_cert): the
  bound is sigma_part >= sigma_cert. Where the partition stops holding is reported.

If the init has a tie (Delta_min(C_0) within rounding, e.g. integer pixel data with data
points as centroids) the trajectories start from Lloyd's first iterate with a margin,
and the note says so; a path with a tie later on does not meet the hypothesis.
"""

from __future__ import annotations

import numpy as np

import softkmeans as sk

from ._common import Row, pyplot
from .claim5_rate import initial_centroids, lloyd_path, margin_floor, no_margin_note, subsample

NUMBER = 7
TITLE = "Soft trajectories follow Lloyd's"

BELOW, ABOVE = 0.999, 1.001
# A soft iterate "moves off" Lloyd's once it differs by more than 1e4 eps max|C|: the
# departure at 1.001 sigma_e is a leak of ~1e-6 (x_i - c_j) / N_j, orders of magnitude
# above that, while rounding differences of two summation orders stay at a few ulp.
DEPART_ULPS = 1e4


def path_geometry(X, path):
    """Per step of the path: Delta_min(C_t), the margin radius R_t and Lloyd's labels."""
    deltas, radii, labels = [], [], []
    for C in path:
        D = np.maximum(sk.sq_distances(X, C).astype(np.float64), 0.0)
        two = np.sqrt(np.partition(D, 1, axis=1)[:, :2])
        deltas.append(float(sk.margins(X, C).astype(np.float64).min()))
        radii.append(float(np.min(two[:, 1] - two[:, 0]) / 2.0))
        labels.append(sk.assign(X, C)[0])
    return np.array(deltas), np.array(radii), labels


def trajectory(X, C0, steps, kind, sigma):
    """Iterates C0, step(C0), ... (steps + 1 arrays) of centroid_step(kind, sigma)."""
    out = [np.array(C0, copy=True)]
    for _ in range(steps):
        out.append(sk.centroid_step(X, out[-1], sigma, kind=kind).centroids)
    return out


def softmax_scan(X, path, radii, labels, ratios, sigma_e, max_failures=3):
    """Softmax trajectories on a grid sigma = ratio sigma_e (ascending).

    Per sigma: max_t drift_t / R_t, whether the partition is Lloyd's at every step, and
    the drift curve. The scan stops after max_failures grid points that lose the
    partition (colder is where the claim lives; hotter only repeats the failure).
    """
    rows, failures = [], 0
    for q in ratios:
        traj = trajectory(X, path[0], len(path) - 1, "softmax", q * sigma_e)
        drift = np.array(
            [np.linalg.norm(S - C, axis=1).max() for S, C in zip(traj, path)], dtype=np.float64
        )
        kept = all(np.array_equal(sk.assign(X, S)[0], lab) for S, lab in zip(traj, labels))
        rows.append(
            {"ratio": q, "drift": drift, "cert": float(np.max(drift / radii)), "kept": kept}
        )
        failures += not kept
        if failures >= max_failures:
            break
    return rows


def _largest_prefix(values, flags):
    """The largest value v such that every flag up to it is True (nan if the first is False)."""
    best = float("nan")
    for v, ok in zip(values, flags):
        if not ok:
            break
        best = v
    return best


def _rows(ds_name, k, g, extra):
    q_lo = f"entmax15 iterates != Lloyd's at sigma = {BELOW} sqrt(Delta_path)/2"
    q_hi = f"first entmax15 iterate off Lloyd's path at sigma = {ABOVE} sqrt(Delta_path)/2"
    q_soft = "largest sigma keeping Lloyd's partition at every step (softmax), vs certified sigma"
    nan = float("nan")
    if g["why"]:
        return [
            Row(NUMBER, ds_name, k, q, nan, nan, "hypothesis not met", g["why"] + extra)
            for q in (q_lo, q_hi, q_soft)
        ]
    head = (
        f"Delta_path={g['delta_path']:.5g} (smallest Lloyd margin, at step {g['t_min']} of "
        f"{g['steps']}), sigma_e={g['sigma_e']:.5g}"
    )
    n_lo = g["lo_diff"]
    note_lo = f"{head}; max |difference| along the path {g['lo_max']:.3g}"
    if n_lo:
        note_lo += (
            f" ({g['lo_ulps']:.0f} ulp; partitions identical at every step: "
            f"{g['lo_same_labels']}: the native entmax15 and hard steps sum in different orders)"
        )
    lo = Row(
        NUMBER, ds_name, k, q_lo, float(n_lo), 0.0, "PASS" if n_lo == 0 else "FAIL", note_lo + extra
    )
    hi_ok = g["hi_first"] == g["hi_pred"]
    hi = Row(
        NUMBER,
        ds_name,
        k,
        q_hi,
        float(g["hi_first"]),
        float(g["hi_pred"]),
        "PASS" if hi_ok else "FAIL",
        f"{head}; predicted: the step after the first C_t with Delta_min(C_t) < 4 sigma^2" + extra,
    )
    scan = g["scan"]
    ratios = [s["ratio"] for s in scan]
    s_part = _largest_prefix(ratios, [s["kept"] for s in scan])
    s_cert = _largest_prefix(ratios, [s["cert"] < 1.0 for s in scan])
    violations = [s["ratio"] for s in scan if s["cert"] < 1.0 and not s["kept"]]
    lost = [s["ratio"] for s in scan if not s["kept"]]
    ok = np.isfinite(s_cert) and not violations and s_part >= s_cert
    note = (
        f"{head}; sigma_part = {s_part:.3g} sigma_e, certified (drift < margin radius at every "
        f"step) up to {s_cert:.3g} sigma_e; "
        + (
            f"partition first lost at {lost[0]:.3g} sigma_e = {lost[0] * g['sigma_e']:.4g}"
            if lost
            else f"partition kept over the whole grid (up to {ratios[-1]:.3g} sigma_e)"
        )
    )
    if violations:
        note += f"; partition lost although certified at {violations}"
    soft = Row(
        NUMBER,
        ds_name,
        k,
        q_soft,
        s_part * g["sigma_e"],
        s_cert * g["sigma_e"],
        "PASS" if ok else "FAIL",
        note + extra,
    )
    return [lo, hi, soft]


def analyse(X, C0, ctx, max_iter, n_ratios):
    """Everything the rows need for one (X, init), as a dict."""
    path, converged = lloyd_path(X, C0, max_iter)
    if converged:
        # Two more steps at the fixed point, so that a departure there is observable.
        path = path + [path[-1], path[-1]]
    deltas, radii, labels = path_geometry(X, path)
    floor = margin_floor(X, C0)
    g = {"why": "", "converged": converged, "start": 0}
    # Start at the first iterate with a margin (the init may be a tie).
    start = int(np.argmax(deltas > floor)) if np.any(deltas > floor) else len(path)
    if start > 0 and start < len(path):
        g["start"] = start
        path, deltas, radii, labels = path[start:], deltas[start:], radii[start:], labels[start:]
    t_min = int(np.argmin(deltas)) if len(deltas) else 0
    dpath = float(deltas[t_min]) if len(deltas) else 0.0
    g.update(delta_path=dpath, t_min=t_min, steps=len(path) - 1, deltas=deltas)
    g["lloyd_steps"] = len(path) - 1 - (2 if converged else 0)
    g["why"] = no_margin_note(dpath, floor)
    if g["why"]:
        g["why"] = "Lloyd's path has no margin: " + g["why"]
        return g
    sigma_e = float(np.sqrt(dpath) / 2.0)
    g["sigma_e"] = sigma_e
    steps = len(path) - 1
    lo = trajectory(X, path[0], steps, "entmax15", BELOW * sigma_e)
    g["lo_diff"] = sum(not np.array_equal(E, C) for E, C in zip(lo, path))
    g["lo_max"] = max(float(np.abs(E - C).max()) for E, C in zip(lo, path))
    g["lo_ulps"] = g["lo_max"] / float(np.spacing(max(np.abs(C).max() for C in path)))
    g["lo_same_labels"] = all(np.array_equal(sk.assign(X, E)[0], lab) for E, lab in zip(lo, labels))
    hi_sigma = ABOVE * sigma_e
    hi = trajectory(X, path[0], steps, "entmax15", hi_sigma)
    tol = DEPART_ULPS * np.finfo(np.float64).eps * max(np.abs(C).max() for C in path)
    off = [t for t, (E, C) in enumerate(zip(hi, path)) if np.abs(E - C).max() > tol]
    g["hi_first"] = off[0] if off else -1
    below = np.flatnonzero(deltas < 4.0 * hi_sigma * hi_sigma)
    g["hi_pred"] = int(below[0]) + 1 if below.size and below[0] < steps else -1
    ratios = np.geomspace(0.1, 16.0, n_ratios)
    g["scan"] = softmax_scan(X, path, radii, labels, ratios, sigma_e)
    return g


def _figure(ds, results, ctx):
    plt = pyplot()
    path = ctx.figure_path(f"claim7_trajectories_{ds.name}")
    results = [(k, g) for k, g in results if not g["why"]]
    if plt is None or path is None or not results:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (k, g) in enumerate(results):
        color = f"C{i % 10}"
        scan = g["scan"]
        q = np.array([s["ratio"] for s in scan])
        cert = np.array([s["cert"] for s in scan])
        kept = np.array([s["kept"] for s in scan])
        shown = cert > 0
        axes[0].loglog(q[shown], cert[shown], "-", color=color, lw=1)
        axes[0].loglog(q[kept & shown], cert[kept & shown], "o", color=color, ms=4, label=f"k={k}")
        axes[0].loglog(q[~kept & shown], cert[~kept & shown], "o", mfc="none", color=color, ms=6)
        # Drift along the steps at the largest sigma that keeps the partition.
        keep_idx = np.flatnonzero(kept)
        if keep_idx.size:
            s = scan[keep_idx[-1]]
            steps = np.arange(len(s["drift"]))
            axes[1].semilogy(
                steps,
                np.maximum(s["drift"], 1e-300),
                ".-",
                color=color,
                label=f"k={k}, sigma = {s['ratio']:.2g} sigma_e",
            )
    axes[0].axhline(1.0, color="k", ls="--", lw=1, label="drift = margin radius")
    axes[0].axvline(1.0, color="gray", ls=":", lw=1, label="sigma_e = sqrt(Delta_path)/2")
    axes[0].set_xlabel("sigma / sigma_e  (dimensionless)")
    axes[0].set_ylabel("max over steps of drift / margin radius R_t")
    axes[0].set_title("softmax vs Lloyd (filled: partition kept at every step)")
    axes[1].set_xlabel("step t")
    axes[1].set_ylabel("drift max_j ||S_t,j - C_t,j||  (data units)")
    axes[1].set_title("drift along the path, largest sigma keeping the partition")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Claim 7, {ds.name}: softmax trajectories drift from Lloyd's as sigma grows")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(ds, ks, ctx):
    """Rows per k: entmax15 bitwise below sigma_e, departure above, softmax partition."""
    X, sub_note = subsample(ds, ctx, 2000 if ctx.quick else 10000)
    rows, results = [], []
    for k in ks:
        if k < 2 or k > X.shape[0]:
            continue
        C0 = initial_centroids(X, k, ctx, ds.name)
        g = analyse(X, C0, ctx, 60 if ctx.quick else 200, 10 if ctx.quick else 36)
        results.append((k, g))
        notes = [
            f"Lloyd: {g['steps']} steps" + ("" if g["converged"] else " (capped, not converged)")
        ]
        if g["start"]:
            notes.append(f"init C_0 is a tie; trajectories start at Lloyd's iterate C_{g['start']}")
        if sub_note:
            notes.append(sub_note)
        rows += _rows(ds.name, k, g, "; " + "; ".join(notes))
    _figure(ds, results, ctx)
    return rows
