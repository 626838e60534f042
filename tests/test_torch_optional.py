"""torch is optional: importing softkmeans and its other modules never imports it (this
file runs whether or not torch is installed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import sys
    import softkmeans
    import softkmeans.reference, softkmeans.cli, softkmeans.fit.annealing_schedule
    import softkmeans.experiments, softkmeans.experiments.datasets
    import softkmeans.experiments.torch_experiments
    from softkmeans.cli import build_parser
    build_parser()
    loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
    print("torch modules:", loaded)
    """
)


def test_importing_softkmeans_does_not_import_torch():
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("torch modules: []"), proc.stdout[-2000:]
