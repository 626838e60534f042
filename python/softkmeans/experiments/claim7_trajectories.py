"""Claim 7: the soft trajectories follow Lloyd's from the same init while Lloyd's path
keeps a margin.

From the k-means++ centroids C_0, Lloyd's path C_0, ..., C_L (to its fixed point, capped;
two more steps at the fixed point so a departure there shows) has the smallest margin
Delta_path = min_t Delta_min(C_t). Every verdict is the oracle's
(`softkmeans.experiments.oracle`: Lloyd's path, entmax15 by the full sort of all k scores,
softmax by scipy's logsumexp, all in float64 from their definitions); the native core's
trajectories against the oracle's are a separate "implementation check" row.

- entmax15 at 0.999 sigma_e (sigma_e = sqrt(Delta_path) / 2): every r is one-hot, so the
  oracle's iterates are Lloyd's, bit for bit; at 1.001 sigma_e the first iterate off
  Lloyd's is the one after the first step whose margin is below 4 sigma^2.
- softmax, an explicit sufficient condition. While the soft iterate S_t is within
  rho_t = R_t / 2 of C_t (R_t = min_i (sqrt(D_i(2)) - sqrt(D_i(1))) / 2 at C_t, the margin
  radius), S_t has C_t's partition, so hard(S_t) = C_{t+1} exactly (the hard step is
  constant on a partition: its Lipschitz constant there is 0) and the drift
  delta_{t+1} = max_j ||S_{t+1,j} - C_{t+1,j}|| is the soft step's error at S_t alone. By
  claim 5's per-entry bound, with L_i = (s_i2 - s_i1 - 2 rho_t)(s_i2 + s_i1 - 2 rho_t) <=
  Delta_i(S_t) and eps_i = exp(-L_i / (2 sigma^2)),
      delta_{t+1} <= B_t(sigma) = max_j [(k-1) sum_{i in A_j} eps_i ||x_i - c_{t+1,j}||
                     + sum_{i not in A_j} eps_i ||x_i - c_{t+1,j}||]
                     / (|A_j| - (k-1) sum_{i in A_j} eps_i).
  So B_t(sigma) <= rho_{t+1} for every t is, by induction from delta_0 = 0, a condition
  under which the partition is Lloyd's at every one of the T steps: sigma_cond is the
  largest such sigma (bisection; B is increasing in sigma). Checked: the oracle's
  softmax trajectory keeps the partition at sigma_cond and at every grid sigma below it;
  the largest grid sigma that keeps it (sigma_part) is reported beside it.
- softmax drift against x = 1 / (2 sigma^2): max_t delta_t = O(exp(-Delta_path x)), so
  the log-slope fitted over the coldest decades above rounding (claim 5's window) is at
  least as steep as -Delta_path.

The condition is sharp up to a small factor where a path passes near a tie. On real data
it is loose (sigma_part / sigma_cond of a few, the note gives it), so its constant is
pinned on a family of constructed 1-D paths (`near_tie_path`: a cluster [0, 0.5, 1, 1.5,
2], a bridge point at 3, 4 or 5, a lone point at 10 or 12 with the second initial
centroid on it, and k - 2 far clusters, k = 2, 3, 4: 18 paths): the softmax step pulls
the lone centroid towards the bridge, whose margin is the path's smallest. Per path the
oracle's softmax trajectory keeps the partition at every grid sigma <= sigma_cond (grid
2^-2 .. SHARP_FACTOR sigma_cond); for the family, every path loses it at some sigma <=
SHARP_FACTOR sigma_cond (the boundary by bisection), and the ratios are reported as a
band. A bound 100 times too small certifies sigmas at which some path loses its
partition (a FAIL). These rows are written once per run, with the data set
NEAR_TIE_HOST (the quantity names the constructed paths).

If the init has a tie (Delta_min(C_0) within rounding, e.g. integer pixel data with data
points as centroids) the trajectories start from Lloyd's first iterate with a margin,
and the note says so; a path with a tie later on does not meet the hypothesis.
"""

from __future__ import annotations

import numpy as np

import softkmeans as sk

from . import oracle as O
from ._common import FAIL, NOT_MET, PASS, Row, pyplot
from .claim5_rate import (
    fit_log_slope,
    initial_centroids,
    margin_floor,
    no_margin_note,
    rounding_floor,
    slope_status,
    subsample,
)

NUMBER = 7
TITLE = "Soft trajectories follow Lloyd's"

BELOW, ABOVE = 0.999, 1.001
# A soft iterate "moves off" Lloyd's once it differs by more than 1e4 eps max|C|: the
# departure at 1.001 sigma_e is a leak of ~1e-6 (x_i - c_j) / N_j, orders of magnitude
# above that, while rounding differences of two summation orders stay at a few ulp.
DEPART_ULPS = 1e4
BOUND_SCALE = 1.0  # B_t is multiplied by this (1: the derived bound; tests plant others)
IMPL_RTOL = 1e-9  # native vs oracle trajectories (T steps of 1e-10-accurate steps)
# The constructed paths near a tie (their rows go with the data set NEAR_TIE_HOST): a
# cluster [0, 0.5, 1, 1.5, 2], a bridge point, a lone point, and k - 2 far clusters.
NEAR_TIE_BRIDGES = (3.0, 4.0, 5.0)  # the bridge point (several gaps to the cluster)
NEAR_TIE_LONES = (10.0, 12.0)  # the lone point (and the second initial centroid)
NEAR_TIE_KS = (2, 3, 4)
NEAR_TIE_HOST = "blobs-separated"  # in both --quick and the full run
SHARP_FACTOR = 3.0  # every path must lose its partition at some sigma <= this x sigma_cond


def path_geometry(X, path):
    """Per step of the path: Delta_min(C_t), the margin radius R_t, labels, sqrt(D)."""
    deltas, radii, labels, roots = [], [], [], []
    for C in path:
        D = O.sq_distances(X, C)
        root = np.sqrt(D)
        two = np.sort(root, axis=1)[:, :2]
        deltas.append(float(O.margins(D).min()))
        radii.append(float(np.min(two[:, 1] - two[:, 0]) / 2.0))
        labels.append(O.labels(D))
        roots.append(root)
    return np.array(deltas), np.array(radii), labels, roots


def trajectory(X, C0, steps, kind, sigma):
    """The oracle's iterates C0, step(C0), ... (steps + 1 arrays)."""
    out = [np.array(C0, dtype=np.float64, copy=True)]
    for _ in range(steps):
        out.append(O.step(X, out[-1], sigma, kind)[0])
    return out


def native_trajectory(X, C0, steps, kind, sigma):
    out = [np.array(C0, copy=True)]
    for _ in range(steps):
        out.append(sk.centroid_step(X, out[-1], sigma, kind=kind).centroids)
    return out


def drift_bound(X, path, radii, labels, roots, sigma):
    """max_t B_t(sigma) / rho_{t+1} (the condition holds when <= 1); inf when a cluster of
    the path is empty (the bound needs |A_j| > 0)."""
    k = path[0].shape[0]
    worst = 0.0
    for t in range(len(path) - 1):
        rho = radii[t] / 2.0
        s = np.sort(roots[t], axis=1)[:, :2]
        low = (s[:, 1] - s[:, 0] - 2 * rho) * (s[:, 1] + s[:, 0] - 2 * rho)
        with np.errstate(under="ignore"):
            eps = np.exp(-low / (2.0 * sigma * sigma))
        member = np.zeros((len(eps), k), dtype=bool)
        member[np.arange(len(eps)), labels[t]] = True
        sizes = member.sum(axis=0)
        if np.any(sizes == 0):
            return float("inf")
        dist = roots[t + 1]  # ||x_i - c_{t+1,j}||
        inside = ((k - 1) * eps[:, None] * dist * member).sum(axis=0)
        outside = (eps[:, None] * dist * ~member).sum(axis=0)
        lost = (k - 1) * (eps[:, None] * member).sum(axis=0)
        denom = sizes - lost
        if np.any(denom <= 0):
            return float("inf")
        bound = BOUND_SCALE * float(np.max((inside + outside) / denom))
        worst = max(worst, bound / (radii[t + 1] / 2.0))
    return worst


def sigma_condition(X, path, radii, labels, roots, sigma_e):
    """The largest sigma with max_t B_t(sigma) / rho_{t+1} <= 1 (bisection in log sigma),
    nan when none in [1e-3, 1e3] sigma_e."""
    lo, hi = 1e-3 * sigma_e, 1e3 * sigma_e
    if drift_bound(X, path, radii, labels, roots, lo) > 1.0:
        return float("nan")
    if drift_bound(X, path, radii, labels, roots, hi) <= 1.0:
        return hi
    for _ in range(50):
        mid = float(np.sqrt(lo * hi))
        if drift_bound(X, path, radii, labels, roots, mid) <= 1.0:
            lo = mid
        else:
            hi = mid
    return lo


def softmax_run(X, path, labels, sigma):
    """(drift per step, partition kept at every step) of the oracle's softmax trajectory."""
    traj = trajectory(X, path[0], len(path) - 1, "softmax", sigma)
    drift = np.array([np.linalg.norm(S - C, axis=1).max() for S, C in zip(traj, path)])
    kept = all(np.array_equal(O.labels(O.sq_distances(X, S)), lab) for S, lab in zip(traj, labels))
    return drift, kept, traj


def analyse(X, C0, ctx, max_iter, n_ratios):
    """Everything the rows need for one (X, init), as a dict."""
    X = np.asarray(X, dtype=np.float64)
    path, converged = O.lloyd(X, C0, max_iter)
    if converged:
        path = path + [path[-1], path[-1]]
    deltas, radii, labels, roots = path_geometry(X, path)
    floor = margin_floor(X, C0)
    g = {"why": "", "converged": converged, "start": 0}
    start = int(np.argmax(deltas > floor)) if np.any(deltas > floor) else len(path)
    if 0 < start < len(path):
        g["start"] = start
        path, deltas, radii = path[start:], deltas[start:], radii[start:]
        labels, roots = labels[start:], roots[start:]
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
    g.update(_entmax15_departure(X, path, deltas, sigma_e))
    # softmax: the certified sigma, the run there, and a scan of sigma / sigma_e.
    s_cond = sigma_condition(X, path, radii, labels, roots, sigma_e)
    g["sigma_cond"] = s_cond
    if np.isfinite(s_cond):
        drift, kept, _ = softmax_run(X, path, labels, s_cond)
        g["cond_kept"], g["cond_drift"] = kept, drift
    g["scan"] = _softmax_scan(X, path, labels, sigma_e, n_ratios)
    g.update(_cold_drift(X, path, labels, dpath, n_ratios))
    g["native"] = _implementation(X, path, sigma_e, s_cond, g)
    g["path"] = path
    return g


def _entmax15_departure(X, path, deltas, sigma_e):
    """entmax15 at BELOW sigma_e against Lloyd's path (lo_diff iterates differ, by at most
    lo_max) and at ABOVE sigma_e: its first iterate off the path (hi_first) and the one the
    margins predict (hi_pred: the step after the first C_t with Delta_min < 4 sigma^2)."""
    steps = len(path) - 1
    lo = trajectory(X, path[0], steps, "entmax15", BELOW * sigma_e)
    out = {"lo_diff": sum(not np.array_equal(E, C) for E, C in zip(lo, path))}
    out["lo_max"] = max(float(np.abs(E - C).max()) for E, C in zip(lo, path))
    hi_sigma = ABOVE * sigma_e
    hi = trajectory(X, path[0], steps, "entmax15", hi_sigma)
    tol = DEPART_ULPS * np.finfo(np.float64).eps * max(np.abs(C).max() for C in path)
    off = [t for t, (E, C) in enumerate(zip(hi, path)) if np.abs(E - C).max() > tol]
    out["hi_first"] = off[0] if off else -1
    below = np.flatnonzero(deltas < 4.0 * hi_sigma * hi_sigma)
    out["hi_pred"] = int(below[0]) + 1 if below.size and below[0] < steps else -1
    return out


def _softmax_scan(X, path, labels, sigma_e, n_ratios):
    """The oracle's softmax runs at sigma / sigma_e on a grid from 0.5 to 16, hot-ward
    until the partition has been lost three times (nothing further is read)."""
    scan, failures = [], 0
    for q in np.geomspace(0.5, 16.0, n_ratios):
        drift, kept, _ = softmax_run(X, path, labels, q * sigma_e)
        scan.append({"ratio": q, "drift": drift, "kept": kept, "max": float(drift.max())})
        failures += not kept
        if failures >= 3:
            break
    return scan


def _cold_drift(X, path, labels, dpath, n_ratios):
    """The max drift against x = 1 / (2 sigma^2) on the cold side, t = Delta_path x in
    [1, 40], hot to cold, and its fitted log-slope. The sweep stops once the drift is within
    1e2 of rounding: the fit window's end."""
    floor = rounding_floor(0.0, path[-1])
    x, dmax = [], []
    for v in np.linspace(1.0, 40.0, max(24, n_ratios)) / dpath:
        x.append(v)
        dmax.append(softmax_run(X, path, labels, float(np.sqrt(0.5 / v)))[0].max())
        if dmax[-1] <= 1e2 * floor:
            break
    out = {"x": np.array(x), "dmax": np.array(dmax)}
    out["slope"], out["mask"] = fit_log_slope(out["x"], out["dmax"], floor)
    return out


def objective_curves(X, g):
    """(label, objective along the trajectory) for Lloyd (J), softmax (F_sigma) at
    sigma_cond and 2 sigma_e, entmax15 (G_sigma) at 1.001 and 2 sigma_e, all from C_0."""
    path, steps, se = g["path"], g["steps"], g["sigma_e"]
    out = [("Lloyd: J", [O.objective(X, C, kind="hard") for C in path])]
    runs = [("softmax", 2.0 * se), ("entmax15", ABOVE * se), ("entmax15", 2.0 * se)]
    if np.isfinite(g["sigma_cond"]):
        runs.insert(0, ("softmax", g["sigma_cond"]))
    for kind, s in runs:
        traj = trajectory(X, path[0], steps, kind, s)
        name = "F" if kind == "softmax" else "G"
        out.append((f"{kind}: {name} at sigma = {s / se:.4g} sigma_e",
                    [O.objective(X, C, s, kind) for C in traj]))  # fmt: skip
    return out


def _implementation(X, path, sigma_e, s_cond, g):
    """Native entmax15 at 0.999 sigma_e vs native Lloyd (bitwise) and native softmax at
    sigma_cond vs the oracle's trajectory: (problems, note)."""
    steps = len(path) - 1
    problems = []
    n_lloyd = native_trajectory(X, path[0], steps, "hard", None)
    n_ent = native_trajectory(X, path[0], steps, "entmax15", BELOW * sigma_e)
    n_diff = sum(not np.array_equal(E, C) for E, C in zip(n_ent, n_lloyd))
    if n_diff:
        problems.append(f"{n_diff} native entmax15 iterates differ from native Lloyd's")
    rel_lloyd = max(
        float(np.abs(A - B).max()) / max(float(np.abs(B).max()), 1e-300)
        for A, B in zip(n_lloyd, path)
    )
    note = (
        f"native entmax15 vs native Lloyd: {n_diff} iterates differ; native Lloyd vs "
        f"oracle {rel_lloyd:.2g}"
    )
    if rel_lloyd > IMPL_RTOL:
        problems.append(f"native Lloyd path off the oracle's by {rel_lloyd:.2g}")
    if np.isfinite(s_cond):
        n_soft = native_trajectory(X, path[0], steps, "softmax", s_cond)
        o_soft = trajectory(X, path[0], steps, "softmax", s_cond)
        rel = max(
            float(np.abs(A - B).max()) / max(float(np.abs(B).max()), 1e-300)
            for A, B in zip(n_soft, o_soft)
        )
        note += f"; native softmax vs oracle at sigma_cond {rel:.2g}"
        if rel > IMPL_RTOL:
            problems.append(f"native softmax trajectory off the oracle's by {rel:.2g}")
    return problems, note


def _rows(ds_name, k, g, extra):
    q_lo = f"oracle: entmax15 iterates != Lloyd's at sigma = {BELOW} sqrt(Delta_path)/2"
    q_hi = f"oracle: first entmax15 iterate off Lloyd's path at sigma = {ABOVE} sqrt(Delta_path)/2"
    q_soft = "oracle: softmax keeps Lloyd's partition at every step for sigma <= sigma_cond"
    q_slope = "oracle: slope of log max_t softmax drift vs 1/(2 sigma^2), vs -Delta_path"
    q_impl = "implementation check: native trajectories vs native Lloyd and the oracle"
    nan = float("nan")
    if g["why"]:
        return [
            Row(NUMBER, ds_name, k, q, nan, nan, NOT_MET, g["why"] + extra)
            for q in (q_lo, q_hi, q_soft, q_slope, q_impl)
        ]
    head = (
        f"Delta_path={g['delta_path']:.5g} (smallest Lloyd margin, at step {g['t_min']} of "
        f"{g['steps']}), sigma_e={g['sigma_e']:.5g}"
    )
    n_lo = g["lo_diff"]
    lo = Row(
        NUMBER, ds_name, k, q_lo, float(n_lo), 0.0, PASS if n_lo == 0 else FAIL,
        f"{head}; max |difference| along the path {g['lo_max']:.3g}" + extra,
    )  # fmt: skip
    hi = Row(
        NUMBER, ds_name, k, q_hi, float(g["hi_first"]), float(g["hi_pred"]),
        PASS if g["hi_first"] == g["hi_pred"] else FAIL,
        f"{head}; predicted: the step after the first C_t with Delta_min(C_t) < 4 sigma^2" + extra,
    )  # fmt: skip
    soft = Row(NUMBER, ds_name, k, q_soft, *_partition_kept(g, head, extra))
    slope = Row(NUMBER, ds_name, k, q_slope, *_drift_slope(g, head, extra))
    problems, impl_note = g["native"]
    impl = Row(
        NUMBER, ds_name, k, q_impl, float(len(problems)), 0.0, FAIL if problems else PASS,
        f"{head}; {impl_note}" + ("; " + "; ".join(problems) if problems else "") + extra,
    )  # fmt: skip
    return [lo, hi, soft, slope, impl]


def _partition_kept(g, head, extra):
    """(measured, predicted, status, note) of the softmax row: Lloyd's partition kept at
    sigma_cond and at every grid sigma below it; measured is the largest grid sigma up to
    which it is kept (sigma_part)."""
    nan = float("nan")
    scan, s_cond = g["scan"], g["sigma_cond"]
    ratios = [s["ratio"] for s in scan]
    kept_flags = [s["kept"] for s in scan]
    s_part = nan
    for q, ok in zip(ratios, kept_flags):
        if not ok:
            break
        s_part = q * g["sigma_e"]
    lost = [q for q, ok in zip(ratios, kept_flags) if not ok]
    if not np.isfinite(s_cond):
        return (
            s_part, nan, NOT_MET,
            f"{head}; the bound certifies no sigma (an empty cluster on the path, or "
            "B_t > rho_{t+1} even at 1e-3 sigma_e)" + extra,
        )  # fmt: skip
    below = [q for q, ok in zip(ratios, kept_flags) if q * g["sigma_e"] <= s_cond and not ok]
    ok = g["cond_kept"] and not below
    note = (
        f"{head}; sigma_cond = {s_cond / g['sigma_e']:.3g} sigma_e (from claim 5's per-entry "
        f"bound over {g['steps']} steps); partition kept at sigma_cond: {g['cond_kept']}; "
        f"largest grid sigma keeping it: {s_part / g['sigma_e']:.3g} sigma_e; "
        + (f"first lost at {lost[0]:.3g} sigma_e" if lost else "kept over the whole grid")
    )
    if below:
        note += f"; LOST below sigma_cond at {below} sigma_e"
    return s_part, s_cond, PASS if ok else FAIL, note + extra


def _drift_slope(g, head, extra):
    """(measured, predicted, status, note) of the drift's log-slope against -Delta_path."""
    status, reason = slope_status(g["slope"], float("nan"), g["delta_path"])
    mask = g["mask"]
    slope_note = f"{head}; fitted slope {g['slope'] / -g['delta_path']:.4f} Delta_path"
    if mask.sum():
        d = g["dmax"][mask]
        slope_note += f" over {int(mask.sum())} sigmas, drift {d.min():.2g}..{d.max():.2g}"
    if reason:
        slope_note += f"; {reason.split(';')[0]}"
    return g["slope"], -g["delta_path"], status, slope_note + extra


def near_tie_path(bridge=3.0, lone=10.0, k=2):
    """(X, C_0) of one constructed path: the cluster [0, 0.5, 1, 1.5, 2], the bridge
    point, the lone point, and k - 2 far clusters of four points 30 apart; C_0 = [0, lone,
    30, 60, ...]. The bridge has the path's smallest margin, and the softmax step pulls the
    lone centroid towards it."""
    X = [0.0, 0.5, 1.0, 1.5, 2.0, bridge, lone]
    C0 = [0.0, lone]
    for j in range(1, k - 1):
        X += [30.0 * j + 0.5 * i for i in range(4)]
        C0.append(30.0 * j)
    return np.array(X)[:, None], np.array(C0)[:, None]


def near_tie(ctx, X=None, C0=None, n_grid=25):
    """One constructed near-tie path: sigma_cond, and the oracle's softmax trajectory on a
    grid sigma / sigma_cond = 2^-2 .. SHARP_FACTOR (1 included); the loss boundary refined
    by bisection between the last kept and the first lost grid sigma."""
    default = near_tie_path()
    X = default[0] if X is None else np.asarray(X, dtype=np.float64)
    C0 = default[1] if C0 is None else np.asarray(C0, dtype=np.float64)
    g = analyse(X, C0, ctx, 50, 4)
    out = {"why": g["why"], "n": X.shape[0], "k": C0.shape[0], "X": X, "C0": C0}
    if g["why"] or not np.isfinite(g["sigma_cond"]):
        out["why"] = out["why"] or "the bound certifies no sigma on the constructed path"
        return out
    path, s_cond = g["path"], g["sigma_cond"]
    _, _, labels, _ = path_geometry(X, path)
    ratios = np.exp2(np.linspace(-2.0, np.log2(SHARP_FACTOR), n_grid))
    kept = [softmax_run(X, path, labels, q * s_cond)[1] for q in ratios]
    out.update(sigma_cond=s_cond, sigma_e=g["sigma_e"], delta_path=g["delta_path"])
    out.update(steps=g["steps"], cond_kept=g["cond_kept"], ratios=ratios, kept=np.array(kept))
    out["boundary"] = float("nan")
    lost = np.flatnonzero(~out["kept"] & (ratios > 1.0))
    if lost.size:
        lo, hi = ratios[lost[0] - 1], ratios[lost[0]]
        for _ in range(30):
            mid = float(np.sqrt(lo * hi))
            if softmax_run(X, path, labels, mid * s_cond)[1]:
                lo = mid
            else:
                hi = mid
        out["boundary"] = hi
    return out


def near_tie_family(ctx, n_grid=25):
    """near_tie of every path of the family (bridges x lone points x k)."""
    return [
        near_tie(ctx, *near_tie_path(b, lone, k), n_grid=n_grid)
        for k in NEAR_TIE_KS
        for b in NEAR_TIE_BRIDGES
        for lone in NEAR_TIE_LONES
    ]


def _path_name(t):
    return f"X = {t['X'].ravel().tolist()}, C_0 = {t['C0'].ravel().tolist()}"


def near_tie_rows(ds_name, family):
    """Per path, a row: the partition is kept at sigma_cond and at every grid sigma below
    it; one row for the family: every path loses it at some sigma <= SHARP_FACTOR
    sigma_cond, the ratios (boundary / sigma_cond, by bisection) reported as a band (all
    decided by the oracle's softmax trajectories)."""
    rows, bounds = [], []
    for t in family:
        what = f"constructed near-tie path ({t['n']} points in 1-D, k={t['k']})"
        q_kept = (
            f"oracle: {what}: softmax keeps Lloyd's partition at every grid sigma <= sigma_cond"
        )
        if t["why"]:
            rows.append(Row(NUMBER, ds_name, t["k"], q_kept, float("nan"), 0.0, FAIL,
                            f"{_path_name(t)}: {t['why']}"))  # fmt: skip
            bounds.append(float("nan"))
            continue
        below = t["ratios"] <= 1.0
        n_bad = int(np.sum(~t["kept"][below])) + (0 if t["cond_kept"] else 1)
        rows.append(Row(
            NUMBER, ds_name, t["k"], q_kept, float(n_bad), 0.0, PASS if n_bad == 0 else FAIL,
            f"{_path_name(t)}; Delta_path={t['delta_path']:.5g}, sigma_cond="
            f"{t['sigma_cond']:.5g} ({t['sigma_cond'] / t['sigma_e']:.3g} sigma_e, {t['steps']} "
            f"steps); kept at sigma_cond: {t['cond_kept']}; grid sigmas <= sigma_cond that lose "
            f"it: {n_bad}; lost at {t['boundary']:.4g} sigma_cond (bisection)",
        ))  # fmt: skip
        bounds.append(t["boundary"])
    bounds = np.array(bounds)
    sharp = bool(np.all(np.isfinite(bounds)) and np.all(bounds <= SHARP_FACTOR))
    band = (
        f"[{np.nanmin(bounds):.3g}, {np.nanmax(bounds):.3g}]" if np.isfinite(bounds).any() else "-"
    )
    not_lost = [i for i, v in enumerate(bounds) if not np.isfinite(v)]
    note = (
        f"{len(family)} paths (bridge at {list(NEAR_TIE_BRIDGES)}, lone point at "
        f"{list(NEAR_TIE_LONES)}, k in {list(NEAR_TIE_KS)}); sigma / sigma_cond where the "
        f"partition is lost: band {band}"
        + (f"; kept up to {SHARP_FACTOR:g} sigma_cond on paths {not_lost}: not sharp"
           if not_lost else "")
    )  # fmt: skip
    q_band = (
        f"oracle: constructed near-tie paths: max sigma / sigma_cond where the partition is "
        f"lost, vs {SHARP_FACTOR:g}"
    )
    measured = float(np.nanmax(bounds)) if not not_lost else float("inf")
    rows.append(Row(NUMBER, ds_name, 2, q_band, measured, SHARP_FACTOR,
                    PASS if sharp else FAIL, note))  # fmt: skip
    return rows


def _figure(ds, results, ctx, X):
    plt = pyplot()
    path = ctx.figure_path(f"claim7_trajectories_{ds.name}")
    results = [(k, g) for k, g in results if not g["why"]]
    if plt is None or path is None or not results:
        return
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    k_last, g_last = results[-1]
    curves = objective_curves(X, g_last)
    j_star = min(min(v) for _, v in curves[:1])
    for i, (label, values) in enumerate(curves):
        rel = (np.array(values) - j_star) / abs(j_star)
        axes[2].plot(np.arange(len(rel)), rel, "o-" if i == 0 else ".-", ms=3, label=label)
    axes[2].set_yscale("symlog", linthresh=1e-6)
    axes[2].set_xlabel("step t")
    axes[2].set_ylabel("(objective - J(C*)) / J(C*)  (dimensionless)")
    axes[2].set_title(f"J, F_sigma, G_sigma along the trajectories (k={k_last})")
    for i, (k, g) in enumerate(results):
        color = f"C{i % 10}"
        t = g["x"] * g["delta_path"]
        shown = g["dmax"] > 0
        axes[0].semilogy(t[shown], g["dmax"][shown], "o-", color=color, lw=1, ms=3,
                         label=f"k={k}")  # fmt: skip
        if np.isfinite(g["sigma_cond"]):
            tc = g["delta_path"] / (2.0 * g["sigma_cond"] ** 2)
            axes[0].axvline(tc, color=color, ls=":", lw=1)
            drift = g["cond_drift"]
            axes[1].semilogy(np.arange(len(drift))[drift > 0], drift[drift > 0], ".-",
                             color=color, label=f"k={k}, sigma = sigma_cond")  # fmt: skip
    axes[0].set_xlabel("Delta_path / (2 sigma^2)  (dimensionless; slope -1 = rate Delta_path)")
    axes[0].set_ylabel("max over steps of ||S_t - C_t||  (data units)")
    axes[0].set_title("softmax drift, cold side (dotted: sigma_cond)")
    axes[0].set_ylim(bottom=max(1e-18, float(min(g["dmax"][g["dmax"] > 0].min()
                                                 for _, g in results)) / 10))  # fmt: skip
    axes[1].set_xlabel("step t")
    axes[1].set_ylabel("drift max_j ||S_t,j - C_t,j||  (data units)")
    axes[1].set_title("drift along the path at the certified sigma_cond")
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Claim 7, {ds.name}: softmax trajectories stay on Lloyd's partition")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(ds, ks, ctx):
    """Rows per k: entmax15 below and above sigma_e, the certified softmax sigma, the drift
    slope, and the implementation check."""
    X, sub_note = subsample(ds, ctx, 1000 if ctx.quick else 3000)
    rows, results = [], []
    for k in ks:
        if k < 2 or k > X.shape[0]:
            continue
        C0 = np.asarray(initial_centroids(X, k, ctx, ds.name), dtype=np.float64)
        g = analyse(X, C0, ctx, 60 if ctx.quick else 100, 10 if ctx.quick else 20)
        results.append((k, g))
        notes = [
            f"Lloyd: {g['steps']} steps" + ("" if g["converged"] else " (capped, not converged)")
        ]
        if g["start"]:
            notes.append(f"init C_0 is a tie; trajectories start at Lloyd's iterate C_{g['start']}")
        if sub_note:
            notes.append(sub_note)
        rows += _rows(ds.name, k, g, "; " + "; ".join(notes))
    _figure(ds, results, ctx, X)
    if ds.name == NEAR_TIE_HOST:
        rows += near_tie_rows(ds.name, near_tie_family(ctx))
    return rows
