"""numpy is the only run-time dependency: without scikit-learn everything but the
estimator works, and the estimator says what to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import sys
    sys.modules["sklearn"] = None  # as if scikit-learn were not installed
    import numpy as np
    import softkmeans
    from softkmeans.cli import main

    X = np.random.default_rng(0).normal(size=(200, 3))
    C, _ = softkmeans.kmeans_plusplus(X, 4, random_state=0)
    step = softkmeans.centroid_step(X, C, 0.5, kind="entmax15")
    assert np.isfinite(step.objective)
    assert main(["cluster", "-k", "3"]) in (0, None)
    try:
        softkmeans.SoftKMeans
    except ImportError as exc:
        assert "softkmeans[sklearn]" in str(exc), exc
        print("ok")
    """
)


def test_everything_but_the_estimator_works_without_scikit_learn():
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok"), proc.stdout[-2000:]


def test_dir_lists_the_public_names():
    """dir(softkmeans) shows what a user may call, SoftKMeans (imported on first use) too."""
    import softkmeans

    names = dir(softkmeans)
    assert "SoftKMeans" in names and set(softkmeans.__all__) <= set(names)
    assert not [n for n in names if n.startswith("_") and not n.startswith("__")]
    for name in softkmeans.__all__:
        assert getattr(softkmeans, name) is not None
