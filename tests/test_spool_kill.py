"""A fit that copies its input to a temporary file (`softkmeans.sources.dense.spool`: a
row-sliceable array-like such as an h5py dataset, or a sampled fit's training rows of a
memory-mapped file) leaves nothing in TMPDIR when the process is killed mid-fit
(issue 36, item 9): the file is unlinked as soon as it is mapped.

A subprocess (TMPDIR a fresh directory) fits with verbose progress; at its first
iteration line the parent sends SIGKILL (no handler, no finalizer runs) and lists TMPDIR.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    r"""
    import sys
    import numpy as np
    from softkmeans import SoftKMeans

    class RowSliceable:  # what an h5py / zarr dataset offers
        def __init__(self, X):
            self.X, self.shape, self.dtype = X, X.shape, X.dtype
        def __getitem__(self, rows):
            return self.X[rows]

    kind = sys.argv[1]
    X = np.random.default_rng(0).normal(size=(60_000, 16)).astype(np.float32)
    if kind == "array-like":
        data, params = RowSliceable(X), {}
    else:  # a sampled fit of a memory-mapped file: the sample is spooled
        path = sys.argv[2]
        mm = np.memmap(path, dtype=np.float32, mode="w+", shape=X.shape)
        mm[:] = X
        mm.flush()
        data = np.memmap(path, dtype=np.float32, mode="r", shape=X.shape)
        params = {"max_points_per_centroid": 100}
    SoftKMeans(64, assignment="hard", init="random", max_iter=10**6, tol=0.0, verbose=1,
               random_state=0, **params).fit(data)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")
@pytest.mark.parametrize("kind", ["array-like", "sampled-memmap"])
def test_a_killed_fit_leaves_no_spooled_file(tmp_path, kind):
    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    env = dict(os.environ, TMPDIR=str(spool_dir), PYTHONUNBUFFERED="1")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, str(tmp_path / "x.f32")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    lines = []
    try:
        for line in child.stdout:
            lines.append(line)
            if line.startswith("Iteration"):
                break
        assert lines and lines[-1].startswith("Iteration"), "".join(lines[-20:])
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=60)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    assert sorted(os.listdir(spool_dir)) == []
