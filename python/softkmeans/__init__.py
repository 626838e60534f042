"""softkmeans: K-Means as the zero-temperature limit of a smooth model.

Three assignment maps share one engine: ``"hard"`` (Lloyd), ``"softmax"``
(normalized Gaussian RBF responsibilities at width sigma, temperature
T = 2 sigma^2, scores -D / (2 sigma^2)) and ``"entmax15"`` (Tsallis-1.5, which
equals Lloyd exactly once sigma <= sqrt(Delta_min) / 2).

``softkmeans.<name>`` runs the native core; ``softkmeans.reference.<name>`` is
the pure-NumPy reference with the identical signature.
"""

from . import reference
from ._api import (
    assign,
    centroid_step,
    critical_sigma,
    entmax15,
    gradients,
    margins,
    native_functions,
    objective,
    responsibilities,
    sq_distances,
)
from ._build_info import build_info
from ._types import StepResult
from .fit.annealing_schedule import AnnealingSchedule
from .fit.phase_diagram import PhaseDiagram, phase_diagram
from .fit.seeding import kmeans_plusplus

__version__ = "0.1.0"

__all__ = [
    "AnnealingSchedule",
    "PhaseDiagram",
    "SoftKMeans",
    "StepResult",
    "assign",
    "build_info",
    "centroid_step",
    "critical_sigma",
    "entmax15",
    "gradients",
    "kmeans_plusplus",
    "margins",
    "native_functions",
    "objective",
    "phase_diagram",
    "reference",
    "responsibilities",
    "sq_distances",
]


def __dir__():
    # The public names, SoftKMeans among them (imported on first use, below).
    return sorted([*__all__, "__version__"])


def __getattr__(name):
    # SoftKMeans needs scikit-learn: imported on first use, so the functional API and
    # `softkmeans info` do not pay for importing scikit-learn.
    if name == "SoftKMeans":
        try:
            from .estimator import SoftKMeans
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] != "sklearn":
                raise
            raise ImportError(
                "softkmeans.SoftKMeans needs scikit-learn >= 1.6: "
                "pip install 'softkmeans[sklearn]' (the functional API, kmeans_plusplus and "
                "the softkmeans command work without it)"
            ) from exc
        return SoftKMeans
    raise AttributeError(f"module 'softkmeans' has no attribute {name!r}")
