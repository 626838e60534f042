"""Result types shared by the native API and the NumPy reference."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class StepResult(NamedTuple):
    """One alternating-minimization step (see SPEC.md, "Centroid step").

    centroids:       (k, d) new centroids, dtype of X; empty clusters keep their old centroid.
    cluster_weights: (k,) N_j = sum_i w_i r_ij, float64.
    objective:       the kind's objective at the input centroids (J, F_sigma or G_sigma).
    distortion:      J at the input centroids.
    min_margin:      Delta_min at the input centroids (inf when k == 1).
    empty:           (k,) bool, True where N_j == 0.
    """

    centroids: np.ndarray
    cluster_weights: np.ndarray
    objective: float
    distortion: float
    min_margin: float
    empty: np.ndarray
