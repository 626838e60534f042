"""Ctrl-C during a sampled fit of a memory-mapped file (issue 24, item 4): SIGINT raises
KeyboardInterrupt within 1 second, whether it lands in the copy of the training sample
to its temporary file (`softkmeans.sources.dense.spool`), in the iterations over the
sample, or in the final pass over every row read in blocks ahead of the compute
(`softkmeans.sources.readahead`), and leaves no temporary file behind.

One subprocess (TMPDIR a fresh directory) runs the three fits in turn with verbose
progress; the parent sends SIGINT when a fit reaches the phase (a line on the child's
stdout) and times the child's "interrupted" line. The file is small (15 MB), so the
child reads it slowly: a sleep before each block of the phase (a disk busy elsewhere),
which Python interrupts at once unless the code under test holds the signal back; and
the phase lasts seconds, so that the fit cannot end before the signal lands.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np

N, D, K, M = 120_000, 32, 64, 500  # a 15 MB file; a sample of 32,000 rows
LATENCY = 1.0  # seconds from SIGINT to KeyboardInterrupt
READ_DELAY = 0.03  # seconds a slowed block takes

CHILD = textwrap.dedent(
    r"""
    import os, sys, time
    import numpy as np
    from softkmeans import SoftKMeans
    from softkmeans.sources import dense, readahead

    path, n, d, k, m, delay = sys.argv[1:]
    n, d, k, m, delay = int(n), int(d), int(k), int(m), float(delay)
    X = np.memmap(path, dtype=np.float32, mode="r", shape=(n, d))
    readahead.MIN_FILE_BYTES = 1 << 20  # read the file (and the sample) in blocks
    readahead.BLOCK_BYTES = 1 << 18
    dense.ROW_BLOCK_BYTES = 1 << 16  # the sample copied 512 rows at a time
    phase = None
    reads = 0

    def slow_read(what):
        global reads
        if phase == what:
            reads += 1
            if reads == 3:
                print(f"reading {what}", flush=True)
            time.sleep(delay)

    gather = dense._Gathered.__getitem__
    def slow_gather(self, rows):
        slow_read("sample")
        return gather(self, rows)
    dense._Gathered.__getitem__ = slow_gather

    class SlowBlocks(readahead.FileBlocks):
        def __iter__(self):
            for block in super().__iter__():
                # The file's blocks in the final pass, the sample's in the iterations.
                slow_read("labelling" if self.X.shape[0] == n else "iterations")
                yield block
    readahead.FileBlocks = SlowBlocks

    for phase, max_iter in (("sample", 10**6), ("iterations", 10**6), ("labelling", 2)):
        reads = 0
        print(f"phase {phase}", flush=True)
        try:
            SoftKMeans(k, assignment="hard", init="random", max_iter=max_iter, tol=0.0,
                       max_points_per_centroid=m, random_state=0, verbose=1).fit(X)
            print("finished", flush=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """
)

# The line of each phase after which the parent sends SIGINT.
TRIGGERS = {
    "sample": "reading sample",
    "iterations": "Iteration ",  # the first progress line of an iteration
    "labelling": "reading labelling",
}


def _write_file(path):
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=4.0, size=(K, D)).astype(np.float32)
    X = centres[rng.integers(0, K, size=N)] + rng.standard_normal((N, D), dtype=np.float32)
    X.tofile(path)


def _lines(stream, out):
    for line in stream:
        out.put((time.monotonic(), line.rstrip("\n")))
    out.put((time.monotonic(), None))


def test_sigint_interrupts_a_sampled_memmap_fit_in_every_phase(tmp_path):
    path = tmp_path / "x.f32"
    _write_file(path)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(N), str(D), str(K), str(M),
         str(READ_DELAY)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    lines = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    latencies, phase, sent = {}, None, None
    try:
        while len(latencies) < len(TRIGGERS):
            # A child that ignores the signal keeps printing: a phase has 10 s after it.
            wait = 60.0 if sent is None else sent + 10.0 - time.monotonic()
            try:
                when, line = lines.get(timeout=max(wait, 0.0))
            except queue.Empty:
                raise AssertionError(f"no KeyboardInterrupt in phase {phase}") from None
            assert line is not None, f"the child ended in phase {phase}:\n{proc.stderr.read()}"
            assert line != "finished", f"the fit of phase {phase} ran to its end"
            if line.startswith("phase "):
                phase, sent = line.split()[1], None
            elif sent is None and line.startswith(TRIGGERS[phase]):
                sent = time.monotonic()
                os.kill(proc.pid, signal.SIGINT)
            elif line == "interrupted":
                assert sent is not None, f"interrupted before SIGINT in phase {phase}"
                latencies[phase] = when - sent
                assert not os.listdir(tmpdir), f"{phase}: left {os.listdir(tmpdir)}"
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    slow = {p: round(t, 3) for p, t in latencies.items() if t >= LATENCY}
    assert not slow, f"KeyboardInterrupt later than {LATENCY} s after SIGINT: {slow}"
    assert not os.listdir(tmpdir)
