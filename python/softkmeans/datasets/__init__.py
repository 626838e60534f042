"""Small real data sets shipped inside the package.

``iris.csv``: Fisher's Iris data (R. A. Fisher, "The use of multiple measurements in
taxonomic problems", Annals of Eugenics 7(2), 1936; measurements by Edgar Anderson),
150 flowers x 4 measurements in cm (sepal length, sepal width, petal length, petal
width) and the species. Public domain. Exported from the copy bundled with scikit-learn
(``sklearn.datasets.load_iris``, which follows Fisher's paper; the UCI copy has two
known transcription errors, in rows 35 and 38). See ``datasets/README.md``.
"""

from __future__ import annotations

import csv
from importlib import resources

import numpy as np

__all__ = ["DEFAULT", "load_iris"]

DEFAULT = "iris"


def _path(name):
    return resources.files(__name__).joinpath(name)


def load_iris():
    """Return ``(X, feature_names, species)``: X float64 (150, 4), names, species (150,)."""
    with _path("iris.csv").open("r", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    X = np.array([[float(v) for v in r[:4]] for r in body], dtype=np.float64)
    species = np.array([r[4] for r in body])
    return X, header[:4], species
