"""The phase diagram (SPEC.md, "Phase diagram (how many clusters)"): splits where the
construction puts them, persistence as defined, n_clusters="auto", the figure."""

from __future__ import annotations

import math

import numpy as np
import pytest

import softkmeans
from softkmeans import SoftKMeans, phase_diagram
from softkmeans.fit.phase_diagram import count_distinct


def _three_clusters(seed=0, spread=0.5):
    """Three round clusters of spread 0.5 (per coordinate), centres 10 apart in 2-d."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [5.0, 8.66]])
    return np.vstack([c + spread * rng.normal(size=(150, 2)) for c in centres])


def test_splits_happen_where_the_construction_puts_them():
    X = _three_clusters()
    pd = phase_diagram(X, max_clusters=5)
    appear = {s.n_after: s.sigma for s in reversed(pd.splits)}
    # The first split: at the critical width (within the cooling step and the time the
    # halves take to move a quarter width apart).
    crit = softkmeans.critical_sigma(X)
    assert 0.75 * crit <= max(s.sigma for s in pd.splits) <= crit
    # Four clusters only once sigma is below a cluster's own critical width, which the
    # construction fixes at its spread, 0.5 (isotropic: lambda_max ~ 0.25).
    four = min(s for k, s in appear.items() if k >= 4)
    assert 0.3 <= four <= 0.5
    assert pd.suggested == 3
    assert max(pd.persistence, key=pd.persistence.get) == 3


def test_persistence_is_the_log_ratio_of_the_widths_where_k_and_k_plus_1_appear():
    X = _three_clusters(1)
    pd = phase_diagram(X, max_clusters=6)
    for k in range(1, int(pd.n_distinct.max())):
        first_k = pd.sigma[np.flatnonzero(pd.n_distinct >= k)[0]] if k > 1 else pd.sigma[0]
        first_next = pd.sigma[np.flatnonzero(pd.n_distinct >= k + 1)[0]]
        assert pd.persistence[k] == pytest.approx(math.log(first_k / first_next), abs=1e-12)
    # The cooling stops once max_clusters + 1 centroids are distinct.
    assert pd.n_distinct[-1] == 7 and (pd.n_distinct[:-1] < 7).all()


def test_the_suggestion_stays_within_the_range():
    X = _three_clusters(2)
    assert phase_diagram(X, max_clusters=2).suggested == 2
    assert phase_diagram(X, min_clusters=4, max_clusters=6).suggested in (4, 5, 6)


def test_count_distinct_links_chains_within_the_tolerance():
    C = np.array([[0.0, 0.0], [0.1, 0.0], [0.2, 0.0], [5.0, 5.0], [5.0, 5.3]])
    assert count_distinct(C, 0.15) == 3  # 0-1-2 chained; 3 and 4 are 0.3 apart
    assert count_distinct(C, 0.35) == 2
    assert count_distinct(C, 0.0) == 5


def test_n_clusters_auto_fits_the_suggested_k():
    X = _three_clusters(3)
    m = SoftKMeans("auto", assignment="hard", random_state=0).fit(X)
    assert m.n_clusters_ == 3 == m.phase_diagram_.suggested
    assert m.cluster_centers_.shape == (3, 2)
    assert m.phase_diagram_.max_clusters == 10
    fixed = SoftKMeans(3, assignment="hard", random_state=0).fit(X)
    assert fixed.n_clusters_ == 3 and not hasattr(fixed, "phase_diagram_")


def test_annealing_fits_carry_their_phase_diagram():
    X = _three_clusters(4)
    m = SoftKMeans(4, anneal={}, random_state=0).fit(X)
    pd = m.phase_diagram_
    assert pd.splits and pd.splits[0].n_before == 1
    assert pd.max_clusters == 3 and pd.suggested == 3


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_clusters": 1}, "max_clusters"),
        ({"max_clusters": 2.5}, "max_clusters"),
        ({"min_clusters": 1}, "min_clusters"),
        ({"min_clusters": 5, "max_clusters": 4}, "min_clusters"),
        ({"merge": -1.0}, "merge"),
    ],
)
def test_bad_ranges_are_refused(kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        phase_diagram(_three_clusters(), **kwargs)


def test_auto_needs_two_samples_and_a_valid_max_clusters():
    with pytest.raises(ValueError, match="n_samples >= 2"):
        SoftKMeans("auto").fit(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="max_clusters"):
        SoftKMeans("auto", max_clusters=1).fit(_three_clusters())
    with pytest.raises(ValueError, match="max_clusters"):
        SoftKMeans(3, max_clusters=0).fit(_three_clusters())
    with pytest.raises(ValueError, match="n_clusters='auto'.*metric='euclidean'"):
        SoftKMeans("auto", metric="cosine").fit(_three_clusters() + 1.0)


def test_the_figure_draws_headless():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    pd = phase_diagram(_three_clusters(), max_clusters=4)
    fig = pd.plot()
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert len(ax.lines) >= 1 + len(pd.splits)  # the count, one marker per split, k
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_the_figure_keeps_its_axis_labels_inside():
    """Issue 36: the x label ("sigma (log scale, ...)") fell below the figure's edge."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = phase_diagram(_three_clusters(), max_clusters=4).plot()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    for label in (ax.xaxis.label, ax.yaxis.label):
        box = label.get_window_extent(renderer)
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1, label.get_text()
        assert fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1, label.get_text()
    plt.close(fig)
