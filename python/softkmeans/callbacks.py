"""scikit-learn's callbacks (``sklearn.callback``, SLEP 023, scikit-learn >= 1.9) for
`SoftKMeans` and `softkmeans.dask.SoftKMeans`.

``SoftKMeans(...).set_callbacks(ProgressBar(), ScoringMonitor(scoring=...), ...)``: any
``FitCallback`` sees the fit's task tree (`softkmeans.fit.tasks`): the fit; one task per
``n_init`` run; inside an annealing run one task per width and one for the exact finish;
one leaf per iteration. Each ``on_fit_task_end`` gets X, y (as passed to ``fit``), the
metadata ``{"sample_weight": ...}`` when weights are given, and a ``fitted_estimator``
that predicts, transforms and scores with the centroids of that point of the fit
(``cluster_centers_``, ``sigma_``, ``n_iter_``; while annealing, the centroids of that
width, which may be fewer than ``n_clusters``). A hook that returns True stops the
iterations of its level: an iteration's ends the run's (or width's) iterations as if
converged, a width's ends the cooling (the finish still runs), a run's ends ``n_init``.

The ``verbose`` lines are unchanged. Without callbacks, or with a scikit-learn older than
1.9, a fit runs as before (no context is made); the fitting package never imports this
module nor scikit-learn.
"""

from __future__ import annotations

from .fit.tasks import Task

try:
    from sklearn.callback import CallbackSupportMixin, with_callbacks
except ImportError:  # scikit-learn < 1.9: no callbacks to support

    class CallbackSupportMixin:  # noqa: D101 - the stand-in adds nothing
        pass

    def with_callbacks(method):
        return method


__all__ = ["CallbackSupportMixin", "ContextTask", "fit_task", "with_callbacks"]


class ContextTask(Task):
    """A `softkmeans.fit.tasks.Task` that is a ``CallbackContext`` of the estimator."""

    def __init__(self, estimator, context, X, y, metadata):
        self.estimator, self.context = estimator, context
        self.X, self.y, self.metadata = X, y, metadata

    def subtask(self, name, max_subtasks=0):
        child = self.context.subcontext(task_name=name, max_subtasks=max_subtasks)
        return ContextTask(self.estimator, child, self.X, self.y, self.metadata)

    def _hook_args(self):
        return dict(estimator=self.estimator, X=self.X, y=self.y, metadata=self.metadata)

    def begin(self):
        self.context.call_on_fit_task_begin(**self._hook_args())

    def end(self, state=None):
        attributes = None
        if state is not None:

            def attributes():
                fitted = dict(state())
                if "sigma_" in fitted:
                    fitted["sigma_"] = float(fitted["sigma_"])
                return fitted

        return self.context.call_on_fit_task_end(
            **self._hook_args(), reconstruction_attributes=attributes
        )


def fit_task(estimator, X, y, sample_weight):
    """The root task of a fit (begun), for an estimator whose callbacks are set (a fit
    without them runs with `NO_TASKS` and does not call this)."""
    # The mixin's documented entry point for an estimator's fit (SLEP 023); the number
    # of runs is known only once the parameters are checked.
    context = estimator._init_callback_context(max_subtasks=None)
    metadata = {"sample_weight": sample_weight} if sample_weight is not None else None
    task = ContextTask(estimator, context, X, y, metadata)
    task.begin()
    return task
