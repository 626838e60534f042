"""Ctrl-C (SIGINT) during long native work raises KeyboardInterrupt within 1 second and
leaves the process usable (the next call returns exactly what it returned before).

Each case runs in a fresh subprocess that sends itself SIGINT from a timer thread ~0.5 s
into the work and reports, as JSON, the latency from the signal to the KeyboardInterrupt.

- loop:   a Python loop of centroid_step calls on large data (each call short): Python
          reacts between calls.
- single: one very long native centroid_step call (~5 s): it reacts in time because the
          binding chains a SIGINT handler that sets the core's cancel flag, polled between
          row tiles.
- fit:    a long SoftKMeans fit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    r"""
    import json, os, signal, sys, threading, time
    import numpy as np
    import softkmeans

    mode = sys.argv[1]
    rng = np.random.default_rng(0)
    small_X = rng.normal(size=(500, 4))
    small_C = small_X[:5].copy()
    expected = softkmeans.centroid_step(small_X, small_C, 0.7, kind="softmax")

    def tiled(block, n):
        reps = -(-n // block.shape[0])
        return np.ascontiguousarray(np.tile(block, (reps, 1))[:n])

    info = {}
    if mode == "loop":
        X = rng.normal(size=(200_000, 16)).astype(np.float32)
        C = X[:64].copy()

        def run():
            while True:
                softkmeans.centroid_step(X, C, 1.0, kind="softmax")

    elif mode == "single":
        # One call sized to take ~5-7 s: d = 64, k = 4096, softmax (an exp per entry).
        # Two calibration calls (the first includes fixed costs and overestimates).
        block = rng.normal(size=(1024, 64)).astype(np.float32)
        C = rng.normal(size=(4096, 64)).astype(np.float32)
        n = 4096
        for target in (0.4, 7.0):
            Xc = tiled(block, n)
            t0 = time.perf_counter()
            softkmeans.centroid_step(Xc, C, 3.0, kind="softmax")
            dt = time.perf_counter() - t0
            n = min(1 << 22, max(4096, int(n * target / max(dt, 1e-4))))
        del Xc
        X = tiled(block, n)
        info["n"] = n

        def run():
            softkmeans.centroid_step(X, C, 3.0, kind="softmax")

    elif mode == "fit":
        X = rng.normal(size=(300_000, 8))
        est = softkmeans.SoftKMeans(
            n_clusters=64, assignment="softmax", sigma=0.3, max_iter=10**6, tol=0.0,
            random_state=0,
        )

        def run():
            est.fit(X)

    sent = {}

    def fire():
        sent["t"] = time.perf_counter()
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.5, fire)
    t_start = time.perf_counter()
    timer.start()
    try:
        run()
        time.sleep(2.0)  # the work ended before the signal: let it arrive
        info["interrupted"] = False
        info["elapsed"] = time.perf_counter() - t_start
    except KeyboardInterrupt:
        info["interrupted"] = True
        info["latency"] = time.perf_counter() - sent["t"]
    again = softkmeans.centroid_step(small_X, small_C, 0.7, kind="softmax")
    info["usable"] = bool(
        np.array_equal(again.centroids, expected.centroids)
        and again.objective == expected.objective
        and np.array_equal(again.cluster_weights, expected.cluster_weights)
    )
    print(json.dumps(info))
    """
)


def _run_child(mode, timeout=60):
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(info, what):
    if not info["interrupted"]:
        pytest.fail(f"{what}: finished before the signal could interrupt it: {info}")
    assert info["latency"] < 1.0, f"{what}: KeyboardInterrupt {info['latency']:.2f} s after SIGINT"
    assert info["usable"], f"{what}: after the interrupt, results changed: {info}"


def test_sigint_during_loop_of_native_calls():
    _check(_run_child("loop"), "loop of centroid_step calls")


def test_sigint_during_one_long_native_call():
    """Regression: the core had no signal check between tiles (KeyboardInterrupt came 2 s late)."""
    _check(_run_child("single"), "one long centroid_step call")


def test_sigint_during_estimator_fit():
    _check(_run_child("fit"), "SoftKMeans.fit")


HANDLER_CHILD = textwrap.dedent(
    r"""
    import os, signal, sys, threading, time
    import numpy as np
    import softkmeans

    rng = np.random.default_rng(1)
    X = np.tile(rng.normal(size=(1024, 64)).astype(np.float32), (64, 1))  # ~0.5 s a call
    C = rng.normal(size=(2048, 64)).astype(np.float32)
    expected = softkmeans.centroid_step(X, C, 3.0, kind="softmax")
    calls = []
    signal.signal(signal.SIGINT, lambda *a: calls.append(time.perf_counter()))
    threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
    got = softkmeans.centroid_step(X, C, 3.0, kind="softmax")
    assert calls, "the user's handler did not run"
    assert np.array_equal(got.centroids, expected.centroids), "cancelled results leaked out"
    assert got.objective == expected.objective
    print("ok")
    """
)


def test_user_sigint_handler_that_returns_gets_complete_results():
    """A handler that does not raise must not see the partial results of a cancelled call."""
    proc = subprocess.run(
        [sys.executable, "-c", HANDLER_CHILD], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
