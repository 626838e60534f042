"""Fashion-MNIST from Debian's ``dataset-fashion-mnist`` package (its idx files).

``apt-get install -y dataset-fashion-mnist`` puts the four gzipped idx files of
Zalando's Fashion-MNIST (70,000 28 x 28 grey images, MIT licence) under
/usr/share/datasets/fashion-mnist. No Python package ships them offline, so the loader
reads that folder (or $SOFTKMEANS_FASHION_MNIST) and, when it is absent, says how to
install it.
"""

from __future__ import annotations

import gzip
import os
import pathlib

import numpy as np

FOLDER = pathlib.Path("/usr/share/datasets/fashion-mnist")
INSTALL = "apt-get install -y dataset-fashion-mnist (Debian/Ubuntu)"
N_KEEP = 5000  # images kept (seeded choice), as mnist5k


def folder() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SOFTKMEANS_FASHION_MNIST", FOLDER))


def read_idx_images(path) -> np.ndarray:
    """(n, rows * cols) uint8 from an idx3-ubyte file, gzipped or not."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, n, rows, cols = (int.from_bytes(data[i : i + 4], "big") for i in range(0, 16, 4))
    if magic != 2051:
        raise ValueError(f"{path}: not an idx3-ubyte image file (magic {magic})")
    return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(n, rows * cols)


def available() -> bool:
    return (folder() / "train-images-idx3-ubyte.gz").is_file()


def load(seed: int = 0) -> np.ndarray:
    """N_KEEP training images (seeded choice) as float64 in [0, 1], (N_KEEP, 784)."""
    X = read_idx_images(folder() / "train-images-idx3-ubyte.gz")
    idx = np.sort(np.random.default_rng(seed).choice(X.shape[0], N_KEEP, replace=False))
    return X[idx].astype(np.float64) / 255.0
