"""Beyond memory (issue 24, item 4): a sampled fit of a memory-mapped file grows the
process's anonymous memory by at most the bounds of the rows fitted (n_fit x (t + 1)
float64: per-group bounds and a label) plus O(k d) plus 10 % of the file; the sample
goes to a temporary file, and a file larger than the read-ahead threshold is read in
blocks with the next block advised (`softkmeans.sources.readahead`).

The fit runs in a subprocess, which samples its own RssAnon (file-backed pages of the
memmap and of the temporary file are not in it) every 2 ms.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

N, D, K, M = 300_000, 128, 64, 1024  # 154 MB of float32; a sample of 65,536 rows (22 %)

CHILD = textwrap.dedent(
    r"""
    import json, sys, threading, time
    import numpy as np
    from softkmeans import SoftKMeans
    from softkmeans.fit.bounded import BoundedHardPass
    from softkmeans.sources import readahead

    path, n, d, k, m, threshold = sys.argv[1:]
    n, d, k, m = int(n), int(d), int(k), int(m)
    readahead.MIN_FILE_BYTES = int(threshold)
    readahead.BLOCK_BYTES = int(threshold) // 2
    X = np.memmap(path, dtype=np.float32, mode="r", shape=(n, d))

    def rss_anon():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon"):
                    return int(line.split()[1]) * 1024

    params = dict(assignment="hard", init=np.array(X[:k]), max_iter=4, tol=0.0,
                  max_points_per_centroid=m, random_state=0)
    SoftKMeans(k, **{**params, "max_points_per_centroid": None}).fit(X[:4000])  # warm up
    blocks = []
    FileBlocks = readahead.FileBlocks
    class Counted(FileBlocks):
        def __iter__(self):
            for block in super().__iter__():
                blocks.append(self.region is not None)
                yield block
    readahead.FileBlocks = Counted
    base = peak = rss_anon()
    stop = False

    def sample():
        global peak
        while not stop:
            peak = max(peak, rss_anon())
            time.sleep(0.002)

    t = threading.Thread(target=sample)
    t.start()
    model = SoftKMeans(k, **params).fit(X)
    stop = True
    t.join()
    print(json.dumps({
        "growth": peak - base, "labels": int(model.labels_.size), "blocks": len(blocks),
        "advised": all(blocks), "groups": BoundedHardPass.MAX_GROUPS,
        "labels_ok": bool(np.array_equal(model.labels_[-3000:], model.predict(X[-3000:]))),
    }))
    """
)


@pytest.fixture(scope="module")
def memmap_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("memmap") / "x.f32"
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=4.0, size=(K, D)).astype(np.float32)
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=(N, D))
    for s in range(0, N, 50_000):
        noise = rng.standard_normal(size=(50_000, D), dtype=np.float32)
        mm[s : s + 50_000] = centres[rng.integers(0, K, size=50_000)] + noise
    mm.flush()
    del mm
    return path


def test_sampled_memmap_fit_stays_within_the_memory_bound(memmap_file):
    threshold = 1 << 25  # read the 154 MB file in blocks, as a file over 1 GiB is
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(memmap_file), str(N), str(D), str(K), str(M),
         str(threshold)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    file_bytes = N * D * 4
    n_fit = K * M
    bound = n_fit * (out["groups"] + 1) * 8 + 64 * K * D * 8 + 0.10 * file_bytes
    assert out["growth"] <= bound, (
        f"anonymous growth {out['growth'] / 1e6:.0f} MB > bound {bound / 1e6:.0f} MB "
        f"({out['growth'] / file_bytes:.1%} of the file)"
    )
    assert out["labels"] == N and out["labels_ok"]
    # The final pass read the file in blocks, each advised ahead.
    assert out["blocks"] >= 4 and out["advised"]


def test_file_region_finds_the_bytes_of_a_view(tmp_path):
    from softkmeans.sources import readahead

    path = tmp_path / "a.f32"
    np.arange(6000, dtype=np.float32).tofile(path)
    mm = np.memmap(path, dtype=np.float32, mode="r", offset=4 * 18, shape=(997, 6))
    view = np.asarray(mm)[10:20]  # a plain ndarray whose base is the memmap
    where, offset = readahead.file_region(view)
    assert str(where) == str(path)
    np.testing.assert_array_equal(np.fromfile(path, np.float32, count=6, offset=offset), view[0])
    assert readahead.file_region(np.zeros((3, 3))) is None


def test_a_memmap_read_in_blocks_fits_as_in_memory(tmp_path, monkeypatch, capsys):
    """Blocks merged in order: the in-memory fit up to rounding, the same labels (and
    annealing, whose rows with a zero column are copied block by block, not whole); a
    sampled fit's verbose output reports the rows labelled block by block."""
    from softkmeans import SoftKMeans
    from softkmeans.sources import readahead

    monkeypatch.setattr(readahead, "MIN_FILE_BYTES", 0)
    monkeypatch.setattr(readahead, "BLOCK_BYTES", 8 * 6 * 700)  # 700 rows a block
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 6)) + rng.integers(0, 4, size=(3000, 1))
    path = tmp_path / "x.f64"
    X.tofile(path)
    mm = np.memmap(path, dtype=np.float64, mode="r", shape=X.shape)
    params = dict(assignment="softmax", sigma=0.5, init=X[:5], max_iter=6, tol=0.0)
    a, b = SoftKMeans(5, **params).fit(mm), SoftKMeans(5, **params).fit(X)
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-12)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    annealing = dict(anneal={"cooling": 0.7, "steps": 10}, random_state=0, max_iter=5)
    a, b = SoftKMeans(4, **annealing).fit(mm), SoftKMeans(4, **annealing).fit(X)
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, rtol=1e-9, atol=1e-12)
    SoftKMeans(5, **params, max_points_per_centroid=100, verbose=1).fit(mm)
    lines = [line for line in capsys.readouterr().out.splitlines() if "labelled" in line]
    assert lines[-1].split()[-4:] == ["3000", "/", "3000", "rows"] and len(lines) == 5


def test_a_spooled_sample_dropped_unclosed_leaves_no_file(tmp_path):
    """A KeyboardInterrupt between `spool`'s return and the caller's ``try`` drops the
    sample unclosed: collecting it removes its temporary file; `close` after that, or
    twice, is harmless."""
    import gc

    from softkmeans.sources.dense import spool

    X = np.arange(60, dtype=np.float32).reshape(20, 3)
    sample = spool(X, directory=tmp_path)
    # Unlinked as soon as mapped (issue 36, item 9: a kill leaves nothing behind); this
    # asserted one file here before.
    assert list(tmp_path.iterdir()) == []
    np.testing.assert_array_equal(sample.dense_array(), X)
    del sample
    gc.collect()
    assert list(tmp_path.iterdir()) == []

    closed = spool(X, directory=tmp_path)
    closed.close()
    closed.close()
    assert list(tmp_path.iterdir()) == []
