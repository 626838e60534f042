"""What every claim module shares: the data set, a result row, the run context.

A claim module (``claimN_<slug>.py``) defines ``NUMBER``, ``TITLE`` and
``run(ds, ks, ctx) -> list[Row]``; `softkmeans.experiments.run_all` calls it once per
data set and writes every row to results.csv and report.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib

import numpy as np

PASS = "PASS"
FAIL = "FAIL"
NOT_MET = "hypothesis not met"
STATUSES = (PASS, FAIL, NOT_MET)
# What a row is: evidence for the claim (it could come out otherwise on other data), an
# identity (it holds for any input, e.g. a random matrix, and only pins a constant: one
# such row per claim, counted apart), or the native core's agreement with the oracle.
EVIDENCE = "evidence"
IDENTITY = "identity"
IMPLEMENTATION = "implementation"
ROLES = (EVIDENCE, IDENTITY, IMPLEMENTATION)
# The data set (in --quick and the full run) that carries each claim's one identity row.
IDENTITY_HOST = "blobs-separated"


@dataclasses.dataclass
class Dataset:
    """A data set ready for the claims: float64 (n, d), C-contiguous, finite."""

    name: str  # short, e.g. "iris", "mnist5k", "blobs-separated"
    X: np.ndarray  # (n, d) float64; already standardized if `standardized`
    source: str  # where it comes from (package and file), human-readable
    licence: str
    standardized: bool  # True when the features were z-scored (mixed units)
    real: bool  # False for the seeded synthetic families
    note: str = ""  # e.g. "subsampled to 20,000 of 327,346 rows (seed 0)"

    def __post_init__(self):
        X = np.ascontiguousarray(self.X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"data set {self.name}: X must be a non-empty (n, d) table")
        if not np.isfinite(X).all():
            raise ValueError(f"data set {self.name}: X has NaN or infinity")
        self.X = X

    @property
    def shape(self) -> tuple[int, int]:
        return self.X.shape


@dataclasses.dataclass
class Row:
    """One check: a measured quantity against its bound or prediction."""

    claim: int  # 1..8
    dataset: str
    k: int
    quantity: str  # what `measured` is, e.g. "(J - F_sigma) / (2 sigma^2 W log k)"
    measured: float
    predicted: float  # the bound or prediction checked against (nan if none)
    status: str  # PASS, FAIL or NOT_MET ("hypothesis not met")
    note: str = ""  # the numbers that explain the status
    role: str = ""  # EVIDENCE, IDENTITY or IMPLEMENTATION ("": from the quantity's name)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"Row.status must be one of {STATUSES}; got {self.status!r}")
        if not self.role:
            implementation = self.quantity.startswith("implementation check")
            self.role = IMPLEMENTATION if implementation else EVIDENCE
        if self.role not in ROLES:
            raise ValueError(f"Row.role must be one of {ROLES}; got {self.role!r}")
        self.claim = int(self.claim)
        self.k = int(self.k)
        self.measured = float(self.measured)
        self.predicted = float(self.predicted)


def _key_int(key) -> int:
    """A stable 32-bit integer for any key (str or int), independent of PYTHONHASHSEED."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return int(key) & 0xFFFFFFFF
    digest = hashlib.sha256(repr(key).encode()).digest()
    return int.from_bytes(digest[:4], "little")


@dataclasses.dataclass
class Context:
    """How a run is made: quick or full, where files go, the seed."""

    quick: bool
    out_dir: pathlib.Path | None  # None: no files (figures skipped)
    seed: int = 0

    def __post_init__(self):
        if self.out_dir is not None:
            self.out_dir = pathlib.Path(self.out_dir)

    def rng(self, *keys) -> np.random.Generator:
        """A generator determined by (seed, keys) alone: the same keys, the same numbers."""
        return np.random.default_rng([self.seed, *(_key_int(k) for k in keys)])

    def figure_path(self, name: str) -> pathlib.Path | None:
        """out_dir/figures/<name>.png (the folder is created), None when there is no out_dir."""
        if self.out_dir is None:
            return None
        folder = self.out_dir / "figures"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{name}.png"


def pyplot():
    """matplotlib.pyplot with the Agg backend, or None when matplotlib is absent."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt
