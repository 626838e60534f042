"""centroid_step never allocates an (n, k) array (issue 3, "Fused centroid step").

n = 2,000,000 points and k = 1,000 centroids: an (n, k) float64 array would take
16 GB. The step runs in a subprocess whose peak resident set size (which sees C++ allocations,
unlike tracemalloc) must stay far below that. The peak is the process's own VmHWM where
Linux has it: ru_maxrss of an exec'd child keeps the parent's high-water mark at the fork
(Linux records the old image's peak at exec), so it read over 1 GiB whenever the pytest
process itself had grown that large.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

N, D, K = 2_000_000, 2, 1_000
LIMIT_BYTES = 1 << 30  # 1 GiB, vs n * k * 8 = 16 GB

_SCRIPT = f"""
import json, resource
import numpy as np
import softkmeans

def peak_bytes():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

rng = np.random.default_rng(0)
X = rng.normal(size=({N}, {D}))
C = X[rng.choice({N}, {K}, replace=False)].copy()
out = {{}}
for kind in ("hard", "softmax", "entmax15"):
    res = softkmeans.centroid_step(X, C, 0.05, kind=kind, n_threads=2)
    assert np.isfinite(res.centroids).all() and res.cluster_weights.sum() > 0
    out[kind] = peak_bytes()
print(json.dumps(out))
"""


@pytest.mark.slow
def test_centroid_step_peak_memory_far_below_n_by_k():
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    peaks = json.loads(proc.stdout.strip().splitlines()[-1])
    dense = N * K * 8
    for kind, peak in peaks.items():
        assert peak < LIMIT_BYTES, (
            f"{kind}: peak RSS {peak / 1e9:.2f} GB (n*k*8 = {dense / 1e9:.0f} GB)"
        )
