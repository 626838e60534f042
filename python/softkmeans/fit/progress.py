"""What a fit tells its user: scikit-learn's verbose lines (its log parsers read ours), a
tqdm bar on a terminal, and warnings issued once per fit."""

from __future__ import annotations

import sys
import time
import warnings

__all__ = [
    "OncePerFit",
    "Progress",
    "QUIET",
    "converged_line",
    "iteration_line",
    "seeding_reporter",
    "width_line",
]


class OncePerFit:
    """Collects warnings during a fit and issues each distinct one once at the end."""

    def __init__(self, category=UserWarning):
        self._seen = {}
        self.category = category

    def has(self, key):
        return key in self._seen

    def add(self, key, message, category=None):
        self._seen.setdefault(key, (message, self.category if category is None else category))

    def flush(self):
        if "found" in self._seen:  # the symptom scikit-learn reports says it all
            self._seen.pop("dup", None)
        for message, category in self._seen.values():
            warnings.warn(message, category, stacklevel=4)


class Progress:
    """verbose >= 1: one line per iteration (per width when annealing); a tqdm bar on a tty."""

    def __init__(self, verbose, total, stream=None):
        self.verbose = verbose
        self.stream = stream if stream is not None else sys.stdout
        self.bar = None
        if verbose and getattr(self.stream, "isatty", lambda: False)():
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, file=self.stream, leave=False)
            except ImportError:  # tqdm is optional
                self.bar = None

    def line(self, text, tick=True):
        """Print a line; tick: it reports a step (the bar advances)."""
        if not self.verbose:
            return
        if self.bar is not None:
            self.bar.update(1 if tick else 0)
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


# The progress of a fit that is not verbose: it prints nothing (made once, not per fit).
QUIET = Progress(0, total=None)

# Seconds between two progress lines of the k-means++ seeding (verbose).
SEEDING_LINE_EVERY = 1.0


def seeding_reporter(progress, n_clusters):
    """report(c) for the greedy k-means++ (`softkmeans.fit.seeding`), called once c of
    n_clusters centres are chosen: a line at most every SEEDING_LINE_EVERY seconds, and
    one at the end where any was printed (a seeding that takes under a second prints
    nothing, so short fits keep scikit-learn's lines). None where progress is None or
    not verbose."""
    if progress is None or not progress.verbose:
        return None
    every, clock = SEEDING_LINE_EVERY, time.perf_counter
    start = last = clock()
    printed = False

    def report(c):
        nonlocal last, printed
        now = clock()
        if now - last >= every or (printed and c == n_clusters):
            progress.line(
                f"k-means++: {c} of {n_clusters} centres chosen  time={now - start:.3f}s",
                tick=False,
            )
            last, printed = now, True

    return report


def width_line(prefix, sigma, objective, J, shift, elapsed):
    return (
        f"{prefix}  sigma={sigma:.6g}  objective={objective:.10g}  J={J:.10g}  "
        f"shift={shift:.3g}  time={elapsed:.3f}s"
    )


def iteration_line(i, kind, sigma, step):
    """scikit-learn's verbose line (its log parsers read ours); the inertia is J at the
    step's input centroids, as scikit-learn's. The soft kinds add their objective and
    width after it."""
    if kind == "hard":
        return f"Iteration {i}, inertia {step.distortion}."
    return f"Iteration {i}, inertia {step.distortion}, objective {step.objective}, sigma {sigma}."


def converged_line(i, shift, tol):
    """scikit-learn's convergence line. Unchanged labels give a zero shift (the centroids
    are the same means): scikit-learn's "strict convergence"."""
    if shift == 0.0 and i > 0:  # scikit-learn has no labels to compare at iteration 0
        return f"Converged at iteration {i}: strict convergence."
    return f"Converged at iteration {i}: center shift {shift} within tolerance {tol}."
