"""The task tree of a fit, for an observer that may stop it (scikit-learn's callbacks).

A fit is a tree of tasks: the fit, one task per ``n_init`` run, inside an annealing run
one task per width (and one for the exact finish), and a leaf per iteration. The fit
package tells a `Task` where it is and asks it whether to stop; `NO_TASKS` is the silent
default, so a fit without callbacks costs a few method calls per iteration. The estimator
maps tasks onto ``sklearn.callback.CallbackContext`` (`softkmeans.callbacks`); this module
imports nothing from scikit-learn (the command line fits without it).

``end(state)`` returns True when the observer asks to stop "the current level of
iterations" (SLEP 023): after an iteration, the run's (or width's) iterations stop as if
converged; after a width, the cooling stops (the finish still runs); after a run, no more
runs start. ``state`` is None or a callable returning the fitted attributes at that point
(``cluster_centers_``, ``sigma_``, ``n_iter_``), called only if an observer needs them.
"""

from __future__ import annotations

__all__ = ["NO_TASKS", "Task"]


class Task:
    """A task that nobody observes: the interface, and the default."""

    def subtask(self, name, max_subtasks=0):
        """The task of a child (max_subtasks: its children, 0 for a leaf, None unknown)."""
        return self

    def begin(self):
        """The task starts."""

    def end(self, state=None):
        """The task ended; True: stop the iterations at this level."""
        return False


NO_TASKS = Task()
