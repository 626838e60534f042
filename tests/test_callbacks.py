"""scikit-learn's callbacks (SLEP 023, ``sklearn.callback``) on `SoftKMeans` (issue 26):
every iteration is seen, in a task tree of runs and annealing widths, and a callback can
stop a fit."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from conftest import make_blobs
from softkmeans import SoftKMeans

callback = pytest.importorskip("sklearn.callback")


class Recorder:
    """A FitCallback that records each task's begin and end, with the fitted estimator
    at each end, and asks to stop at the end of the task named ``stop_at``."""

    def __init__(self, stop_at=None):
        self.stop_at = stop_at
        self.events = []

    def setup(self, estimator, context):
        self.events.append(("setup", None, None))

    def teardown(self, estimator, context):
        self.events.append(("teardown", None, None))

    def on_fit_task_begin(self, estimator, context, *, X=None):
        self.events.append(("begin", _path(context), None))

    def on_fit_task_end(self, estimator, context, *, X=None, fitted_estimator=None):
        self.events.append(("end", _path(context), fitted_estimator))
        return context.task_name == self.stop_at

    def ends(self, prefix):
        return [(p, f) for e, p, f in self.events if e == "end" and p[-1].startswith(prefix)]


def _path(context):
    names = []
    while context is not None:
        names.append(context.task_name)
        context = context.parent
    return tuple(reversed(names))


def _X(n=400, seed=0):
    return make_blobs(n, 3, 4, seed=seed, centre_scale=4.0)[0]


@pytest.mark.parametrize("assignment", ["hard", "softmax", "entmax15"])
def test_callbacks_see_every_iteration_of_every_run(assignment):
    X = _X()
    rec = Recorder()
    km = SoftKMeans(4, assignment=assignment, n_init=3, init="random", random_state=0)
    km.set_callbacks(rec).fit(X)
    assert rec.events[0][0] == "setup" and rec.events[-1][0] == "teardown"
    assert rec.events[1][:2] == ("begin", ("fit",))
    assert rec.events[-2][:2] == ("end", ("fit",))
    runs = rec.ends("run")
    assert [p for p, _ in runs] == [("fit", f"run {r}") for r in range(3)]
    for r, (_, run_fit) in enumerate(runs):
        steps = [(p, f) for p, f in rec.ends("iteration") if p[1] == f"run {r}"]
        assert [p[-1] for p, _ in steps] == [f"iteration {i}" for i in range(len(steps))]
        assert [f.n_iter_ for _, f in steps] == list(range(1, len(steps) + 1))
        assert run_fit.n_iter_ == len(steps)
        # Each step's fitted estimator predicts with that step's centroids.
        np.testing.assert_array_equal(steps[-1][1].cluster_centers_, run_fit.cluster_centers_)
        assert steps[-1][1].predict(X).shape == (X.shape[0],)
    kept = [f for _, f in runs if np.array_equal(f.cluster_centers_, km.cluster_centers_)]
    assert kept and kept[0].n_iter_ == km.n_iter_
    final = rec.ends("fit")[0][1]
    np.testing.assert_array_equal(final.labels_, km.labels_)


def test_annealing_has_a_task_per_width_and_one_for_the_finish():
    X = _X(seed=1)
    rec = Recorder()
    km = SoftKMeans(4, anneal={"cooling": 0.6, "steps": 10}, random_state=0).set_callbacks(rec)
    km.fit(X)
    widths = rec.ends("width")
    finish = rec.ends("finish")
    assert len(widths) >= 3 and len(finish) == 1
    assert all(p[:2] == ("fit", "run 0") for p, _ in widths + finish)
    # Every step is a leaf of its width or of the finish: n_iter_ of them in all.
    steps = rec.ends("iteration")
    assert len(steps) == km.n_iter_ == len(km.history_["sigma"])
    assert {p[2].split()[0] for p, _ in steps} == {"width", "finish"}
    sigmas = [float(p[-1].split()[1]) for p, _ in widths]
    assert sigmas == sorted(sigmas, reverse=True)


def test_a_callback_stops_the_iterations_of_its_level():
    X = _X(seed=2)
    params = dict(assignment="softmax", tol=0.0, max_iter=50, random_state=0)
    full = SoftKMeans(4, **params).fit(X)
    assert full.n_iter_ > 3
    stopped = SoftKMeans(4, **params).set_callbacks(Recorder("iteration 2")).fit(X)
    assert stopped.n_iter_ == 3
    np.testing.assert_array_equal(stopped.history_["J"], full.history_["J"][:3])
    assert stopped.labels_.shape == (X.shape[0],)  # a complete fit, stopped early
    rec = Recorder("run 0")
    SoftKMeans(4, assignment="hard", n_init=5, init="random", random_state=0).set_callbacks(
        rec
    ).fit(X)
    assert [p[-1] for p, _ in rec.ends("run")] == ["run 0"]
    anneal = dict(anneal={"cooling": 0.6, "steps": 10}, random_state=0)
    rec = Recorder()
    SoftKMeans(4, **anneal).set_callbacks(rec).fit(X)
    first = Recorder(stop_at=rec.ends("width")[0][0][-1])  # the end of the first width
    SoftKMeans(4, **anneal).set_callbacks(first).fit(X)
    assert len(first.ends("width")) == 1 < len(rec.ends("width"))
    assert len(first.ends("finish")) == 1  # the finish still runs


def test_verbose_output_is_unchanged_by_callbacks(capsys):
    X = _X(seed=3)
    SoftKMeans(4, assignment="hard", random_state=0, verbose=1).fit(X)
    plain = capsys.readouterr().out
    SoftKMeans(4, assignment="hard", random_state=0, verbose=1).set_callbacks(Recorder()).fit(X)
    assert capsys.readouterr().out == plain


def test_scoring_monitor_logs_a_score_per_task():
    X = _X(300, seed=4)
    y = SoftKMeans(4, assignment="hard", random_state=1).fit_predict(X)  # some labels
    monitor = callback.ScoringMonitor(scoring="adjusted_rand_score")
    km = SoftKMeans(4, assignment="hard", random_state=0).set_callbacks(monitor).fit(X, y)
    log = monitor.get_logs()
    rows = log.data
    steps = [r for r in rows if r["task_name"].startswith("iteration")]
    assert len(steps) == km.n_iter_
    assert all(0.0 <= r["adjusted_rand_score"] <= 1.0 for r in rows)
    assert sorted(r["task_name"] for r in rows if not r["task_name"].startswith("it")) == [
        "fit",
        "run 0",
    ]


def test_progress_bar_runs():  # ProgressBar needs rich: in the test extra
    X = _X(seed=5)
    km = SoftKMeans(4, random_state=0).set_callbacks(callback.ProgressBar()).fit(X)
    assert km.n_iter_ >= 1


def test_without_callbacks_no_context_is_made(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a callback context without callbacks")

    monkeypatch.setattr(SoftKMeans, "_init_callback_context", refuse)
    SoftKMeans(3, random_state=0).fit(_X())
    km = SoftKMeans(3, random_state=0).set_callbacks(Recorder())
    with pytest.raises(AssertionError, match="without callbacks"):
        km.fit(_X())


def test_the_dask_estimator_takes_callbacks():
    pytest.importorskip("dask.array")
    import dask.array as da

    from softkmeans.dask import SoftKMeans as DaskSoftKMeans

    X = _X(seed=6)
    rec = Recorder()
    km = DaskSoftKMeans(4, assignment="hard", random_state=0).set_callbacks(rec)
    km.fit(da.from_array(X, chunks=100))
    assert len(rec.ends("iteration")) == km.n_iter_


def test_an_older_scikit_learn_without_callbacks_fits_as_before():
    code = (
        "import sys; sys.modules['sklearn.callback'] = None\n"
        "import numpy as np; from softkmeans import SoftKMeans\n"
        "X = np.random.default_rng(0).normal(size=(100, 2))\n"
        "km = SoftKMeans(3, random_state=0).fit(X)\n"
        "assert not hasattr(km, 'set_callbacks') and km.n_iter_ >= 1\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
