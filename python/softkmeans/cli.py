"""The ``softkmeans`` command line (also ``python -m softkmeans``).

    softkmeans cluster [DATA] [-k K] [--assignment hard|softmax|entmax15|all] [--sigma S]
                       [--anneal [key=value,...]] [--out DIR] ...
    softkmeans info
    softkmeans reproduce [--quick] [--torch] [--out DIR] [--datasets NAME,...] [--claims N,...]

DATA is .csv/.tsv/.txt (numeric columns; a header row detected or set by --header /
--no-header), .parquet (needs pyarrow), .npy or .npz, read by `softkmeans.reading`;
without DATA the built-in Iris data set is clustered. A user error (missing file, wrong
shape, k > n, a non-numeric column, a bad option, an unwritable --out, checked before the
fit) prints one line on stderr and exits with status 1 (2 for command-line syntax); no
traceback. Notes (a dropped index column, a detected header) and warnings print one line
each on stderr too, and so does a long fit's progress (on a terminal, or with --progress).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import warnings

import numpy as np

from .fit.params import DEFAULTS
from .fit.tasks import Task

KINDS = ("hard", "softmax", "entmax15")


class UserError(Exception):
    """An error in what the user asked for: reported as one line, no traceback."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2 (argparse's convention)
        self.exit(2, f"{self.prog}: error: {message}\n")


# ----------------------------------------------------------------------------- data


def load_data(path, *, header=None, columns=None):
    """(X, column names, description, notes, warnings) from DATA (`softkmeans.reading`),
    or the built-in Iris data set when path is None."""
    if path is None:
        from .datasets import load_iris

        if columns is not None:
            raise UserError("--columns needs a DATA file")
        X, names, _ = load_iris()
        return X, list(names), "built-in Iris (Fisher 1936, public domain), 150 x 4", [], []
    from .reading import DataError, read_table

    try:
        table = read_table(path, header=header, columns=columns)
    except DataError as exc:
        raise UserError(str(exc)) from None
    n, d = table.X.shape
    return table.X, table.names, f"{path}, {n} x {d}", table.notes, table.warnings


def _parse_anneal(text):
    if text is None:
        return None
    if text in ("", "default", "true", "yes"):
        return True
    spec = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"--anneal expects key=value pairs; got {item!r}")
        key = key.strip()
        value = value.strip()
        if key in ("kind",):
            spec[key] = value
        elif key == "finish":
            spec[key] = value.lower() in ("1", "true", "yes")
        elif key in ("steps", "splits"):
            try:
                spec[key] = int(value)
            except ValueError:
                raise UserError(f"--anneal {key} must be an integer; got {value!r}") from None
        else:
            try:
                spec[key] = float(value)
            except ValueError:
                raise UserError(f"--anneal {key} must be a number; got {value!r}") from None
    return spec


# ----------------------------------------------------------------------------- output


def _table(rows):
    head = ("assignment", "J", "objective", "iters", "time [s]", "min margin", "exact Lloyd")
    body = [
        (
            r["assignment"],
            f"{r['J']:.6g}",
            f"{r['objective']:.6g}",
            str(r["n_iter"]),
            f"{r['time_s']:.3f}",
            f"{r['min_margin']:.4g}",
            "yes" if r["exact_lloyd"] else "no",
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*b) for b in body]
    return "\n".join(lines)


def _write_csv(path, array, fmt, header):
    """A CSV with a header line (column names, comma-separated, as pandas writes them)."""
    np.savetxt(path, array, delimiter=",", fmt=fmt, header=",".join(header), comments="")


def _check_out(out):
    """--out: created if needed, and a file written and removed there, before any fit."""
    if out is None:
        return
    try:
        os.makedirs(out, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".softkmeans-", delete=True):
            pass
    except OSError as exc:
        raise UserError(f"cannot write to {out}: {exc.strerror or exc}") from None


def _standardize(X, names):
    """(Z, mean, scale): z-scores; a constant column gets scale 1 (it is only centred)."""
    mean = X.mean(axis=0)
    std = X.std(axis=0)
    constant = [names[j] for j in np.flatnonzero(std == 0)]
    if constant:
        note(f"--standardize: constant column(s) {', '.join(constant[:5])} only centred")
    scale = np.where(std > 0, std, 1.0)
    return (X - mean) / scale, mean, scale


def note(message):
    """A notice on stderr, one line (warnings use the same form)."""
    print(f"softkmeans: note: {message}", file=sys.stderr)


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    text = str(message).strip().splitlines()
    first = text[0] if text else category.__name__
    print(f"softkmeans: warning: {first}", file=sys.stderr)


# ----------------------------------------------------------------------------- progress

# A long fit reports where it is on stderr: the first line after PROGRESS_AFTER seconds,
# then lines at least PROGRESS_EVERY seconds and PROGRESS_GROWTH x the time so far apart
# (a 10-minute fit prints about 25 lines, a 1-second one none).
PROGRESS_AFTER = 2.0
PROGRESS_EVERY = 2.0
PROGRESS_GROWTH = 0.25


class FitProgress(Task):
    """The fit's task tree (`softkmeans.fit.tasks`) reported as lines on stderr:
    ``softkmeans: softmax: run 1, iteration 12 [4.1 s]``. A heartbeat thread reports the
    stretches without a task event (seeding, a long native pass) with the last place."""

    def __init__(self, label, stream=None, path=(), shared=None):
        self.path = path
        self.shared = shared if shared is not None else {
            "label": label, "stream": stream or sys.stderr, "t0": time.perf_counter(),
            "last": None, "where": "starting", "lock": threading.Lock(),
        }  # fmt: skip

    def subtask(self, name, max_subtasks=0):
        return FitProgress(None, path=(*self.path, name), shared=self.shared)

    def begin(self):
        parts = [_place(name) for name in self.path]
        if self.path and self.path[-1].startswith("run "):
            parts.append("initializing")
        self.shared["where"] = ", ".join(parts)
        self.report()

    def report(self):
        """Print the place if the spacing allows it."""
        state = self.shared
        with state["lock"]:
            elapsed = time.perf_counter() - state["t0"]
            last = state["last"]
            gap = max(PROGRESS_EVERY, PROGRESS_GROWTH * elapsed)
            if elapsed < PROGRESS_AFTER or (last is not None and elapsed - last < gap):
                return
            state["last"] = elapsed
            line = f"softkmeans: {state['label']}: {state['where']} [{elapsed:.1f} s]"
            print(line, file=state["stream"], flush=True)

    def __enter__(self):
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)
        self._beat.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._beat.join()

    def _heartbeat(self):
        while not self._stop.wait(max(PROGRESS_EVERY / 4, 0.01)):
            self.report()


def _place(name):
    """A task's name as a user counts: "run 0" -> "run 1", "iteration 3" -> "iteration 4"."""
    word, _, number = name.partition(" ")
    if word in ("run", "iteration") and number.isdigit():
        return f"{word} {int(number) + 1}"
    return "sigma " + number if word == "width" else name


def _progress_on(args):
    """--progress / --no-progress; by default on when stderr is a terminal."""
    if args.progress is not None:
        return args.progress
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


# ----------------------------------------------------------------------------- commands


def cmd_cluster(args):
    X, names, description = _cluster_input(args)
    data, units = X, None
    if args.standardize:
        data, mean, scale = _standardize(X, names)
        units = (mean, scale)
    rows, models = [], {}
    for kind in KINDS if args.assignment == "all" else (args.assignment,):
        models[kind], row = _fit_one(args, kind, data)
        rows.append(row)
    print(f"data: {description}; k = {args.k}{'; standardized' if args.standardize else ''}")
    print(_table(rows))
    if args.out is not None:
        try:
            _write_results(args, models, rows, data, names, units, description, X.shape)
        except OSError as exc:
            raise UserError(f"cannot write to {args.out}: {exc}") from None
        proba = ["proba_*.csv"] if args.proba else []
        written = ", ".join(["centroids_*.csv", "labels_*.csv", *proba])
        print(f"wrote {written} and summary.json to {args.out}")
    return 0


def _cluster_input(args):
    """Check the options that need no data, then read DATA: (X, names, description)."""
    if args.k < 1:
        raise UserError(f"-k must be >= 1; got {args.k}")
    if args.proba and args.out is None:
        raise UserError("--proba writes proba_*.csv and needs --out DIR")
    args.anneal = _parse_anneal(args.anneal)
    columns = _split_list(args.columns, "columns")
    _check_out(args.out)
    X, names, description, notes, warns = load_data(args.data, header=args.header, columns=columns)
    for text in notes:
        note(text)
    for text in warns:
        print(f"softkmeans: warning: {text}", file=sys.stderr)
    if args.k > X.shape[0]:
        raise UserError(f"-k {args.k} is larger than the number of points ({X.shape[0]})")
    return X, names, description


def _fit_one(args, kind, data):
    """(the fitted model, its row of the summary)."""
    # The driver behind SoftKMeans, without scikit-learn's import time (see fit.driver).
    from .fit.driver import Fitter
    from .fit.params import FitParams

    params = FitParams(
        n_clusters=args.k, assignment=kind, sigma=args.sigma, anneal=args.anneal,
        n_init=args.n_init, max_iter=args.max_iter, tol=args.tol,
        random_state=args.random_state, n_threads=args.threads, verbose=args.verbose,
    )  # fmt: skip
    t0 = time.perf_counter()
    if _progress_on(args):
        with FitProgress(kind) as progress:
            model = Fitter(params, task=progress).fit(data)
    else:
        model = Fitter(params).fit(data)
    row = {
        "assignment": kind,
        "J": model.inertia_,
        "objective": model.objective_,
        "sigma": model.sigma_,
        "n_iter": int(model.n_iter_),
        "time_s": time.perf_counter() - t0,
        "min_margin": model.min_margin_,
        "exact_lloyd": bool(model.exact_lloyd_),
        "critical_sigma": model.critical_sigma_,
        "phase_transitions": model.history_["transitions"],
    }
    return model, row


def _write_results(args, models, rows, data, names, units, description, shape):
    """centroids_<kind>.csv (in the data's units), labels_<kind>.csv, proba_<kind>.csv
    with --proba, and summary.json, in args.out."""
    for kind, model in models.items():
        C = model.cluster_centers_
        if units is not None:  # fitted on z-scores: back in the data's own units
            C = C * units[1] + units[0]
        _write_csv(os.path.join(args.out, f"centroids_{kind}.csv"), C, "%.17g", names)
        labels = os.path.join(args.out, f"labels_{kind}.csv")
        _write_csv(labels, model.labels_, "%d", ["label"])
        if args.proba:
            _write_proba(args, kind, model, data)
    finite = [
        {key: (None if isinstance(val, float) and not np.isfinite(val) else val)
         for key, val in r.items()}
        for r in rows
    ]  # fmt: skip
    summary = {
        "data": description,
        "columns": names,
        "standardized": units is not None,
        "n_samples": int(shape[0]),
        "n_features": int(shape[1]),
        "k": args.k,
        "results": finite,
    }
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)


def _write_proba(args, kind, model, X):
    """proba_<kind>.csv: the responsibilities (n, k) at the fitted width (one-hot for hard)."""
    from . import sources
    from .sources import reads

    source = sources.source_of(X, n_threads=0)
    C = model.cluster_centers_.astype(source.dtype, copy=False)
    R = reads.responsibilities(source, C, kind, model.sigma_)
    header = [f"cluster{j}" for j in range(R.shape[1])]
    _write_csv(os.path.join(args.out, f"proba_{kind}.csv"), R, "%.9g", header)


def cmd_info(args):
    from . import __version__, native_functions
    from ._build_info import build_info

    info = build_info()
    print(f"softkmeans {__version__}")
    for key, value in info.items():
        if isinstance(value, (list, tuple)):
            value = ", ".join(str(v) for v in value)
        print(f"  {key}: {value}")
    print(f"  native functions: {', '.join(native_functions())}")
    return 0


def _split_list(text, what):
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise UserError(f"--{what} expects a comma-separated list; got {text!r}")
    return items


def cmd_reproduce(args):
    from .experiments import FAIL, datasets

    names = _split_list(args.datasets, "datasets")
    claims = _split_list(args.claims, "claims")
    if claims is not None:
        try:
            claims = [int(c) for c in claims]
        except ValueError:
            raise UserError(
                f"--claims expects numbers (1..8; 9..12 with --torch); got {args.claims!r}"
            ) from None
    if args.list:
        for spec in datasets.SPECS:
            kind = "real" if spec.real else "synthetic"
            quick = ", --quick" if spec.quick else ""
            print(f"{spec.name} ({kind}{quick}; k = {', '.join(map(str, spec.ks))})")
        return 0
    t0 = time.perf_counter()
    try:
        rows = _reproduce_rows(args, names, claims)
    except OSError as exc:
        raise UserError(f"cannot write to {args.out}: {exc}") from None
    n_fail = sum(r.status == FAIL for r in rows)
    n_pass = sum(r.status == "PASS" for r in rows)
    print(
        f"{len(rows)} checks: {n_pass} PASS, {n_fail} FAIL, "
        f"{len(rows) - n_pass - n_fail} hypothesis not met [{time.perf_counter() - t0:.1f} s]"
    )
    if args.out is not None:
        try:
            import matplotlib  # noqa: F401 - the figures are drawn only with it
        except ImportError:
            drawn = "no figures (matplotlib is not installed: pip install matplotlib)"
        else:
            drawn = "figures/"
        print(f"wrote report.md, results.csv and {drawn} to {args.out}")
    return 1 if n_fail else 0


def _reproduce_rows(args, names, claims):
    """The rows of the claims (run_all), or with --torch of the PyTorch experiments 9-12."""
    from .experiments import run_all

    kwargs = dict(datasets=names, progress=print, seed=args.seed, threads=args.threads)
    if not args.torch:
        return run_all(args.quick, args.out, claims=claims, **kwargs)
    from .experiments.torch_experiments import run_torch  # imports torch when it runs

    try:
        rows, _ = run_torch(args.quick, args.out, experiments=claims, **kwargs)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "torch":
            raise
        raise UserError(
            "--torch needs PyTorch; its CPU build: pip install torch "
            "--index-url https://download.pytorch.org/whl/cpu"
        ) from None
    return rows


# ----------------------------------------------------------------------------- the parser


def _auto_or(kind, what, words=("auto",)):
    """An argparse type: one of `words` ("auto") or a `kind` (its range is checked with
    the other parameters); anything else is a one-line usage error saying so."""

    def convert(text):
        if text in words:
            return text
        try:
            return kind(text)
        except ValueError:
            named = " or ".join(repr(w) for w in words)
            raise argparse.ArgumentTypeError(f"expects {what} or {named}; got {text!r}") from None

    return convert


_n_init_arg = _auto_or(int, "an integer")
# "default": SoftKMeans' own default width (the parser's default, `FitParams`).
_sigma_arg = _auto_or(float, "a number", words=("auto", "default"))


def _option(*flags, **kwargs):
    return flags, kwargs


_THREADS = _option(
    "--threads", type=int, default=DEFAULTS.n_threads,
    help="OpenMP threads of the native core (default: its default)",
)  # fmt: skip

# Each subcommand: (name, help, function, options); each option: argparse's arguments.
COMMANDS = (
    ("cluster", "cluster a data file (or the built-in Iris data) and print a summary table",
     "cmd_cluster", (
        _option("data", nargs="?", default=None, metavar="DATA",
                help=".csv, .tsv, .txt (numbers; read by pandas, pyarrow or numpy.loadtxt, "
                "whichever is installed first), .parquet, .npy or .npz (the array X, or its "
                "only one); default: the built-in Iris data set"),
        _option("--header", action=argparse.BooleanOptionalAction, default=None,
                help="the first row of a text file is (--header) or is not (--no-header) a row "
                "of column names; default: detected (a header of numbers above decimals is "
                "detected and noted, one that only stands out is warned about)"),
        _option("--columns", default=None, metavar="NAME,...",
                help="cluster only these columns, by name or 1-based number; the others are "
                "not read (they may hold text), and an index column named here is kept "
                "(otherwise a first column of index or id integers is dropped with a note)"),
        _option("--standardize", action="store_true",
                help="scale each column to mean 0 and standard deviation 1 before the fit "
                "(centroids are written in the data's units)"),
        _option("-k", "--n-clusters", dest="k", type=int, default=3, help="clusters (3)"),
        _option("--assignment", choices=(*KINDS, "all"), default="all",
                help="assignment map, or all three side by side (default)"),
        _option("--sigma", type=_sigma_arg, default=DEFAULTS.sigma, metavar="S|auto|default",
                help="RBF width (T = 2 sigma^2), or 'auto' (the mixture's maximum-likelihood "
                "width); default: SoftKMeans' default"),
        _option("--anneal", nargs="?", const="default", default=None, metavar="KEY=VALUE,...",
                help="deterministic annealing; optional start, stop, cooling, steps, splits, "
                "perturbation, kind, finish as key=value pairs"),
        _option("--n-init", type=_n_init_arg, default=DEFAULTS.n_init,
                help="runs per fit, or 'auto' (1 for k-means++ seeding; the default)"),
        _option("--max-iter", type=int, default=DEFAULTS.max_iter,
                help=f"most centroid steps per run ({DEFAULTS.max_iter})"),
        _option("--tol", type=float, default=DEFAULTS.tol,
                help=f"stop when the squared centroid shift is <= tol x the mean feature "
                f"variance ({DEFAULTS.tol:g}, scikit-learn's rule)"),
        # The command's own choice: a reproducible run by default (the estimator's
        # default is None, a fresh seed).
        _option("--random-state", type=int, default=0, help="seed of the initialization (0)"),
        _THREADS,
        _option("--out", default=None, metavar="DIR",
                help="write centroids_*.csv, labels_*.csv and summary.json here (checked "
                "before the fit)"),
        _option("--proba", action="store_true",
                help="also write proba_*.csv, each row's responsibilities (needs --out)"),
        _option("--progress", action=argparse.BooleanOptionalAction, default=None,
                help="report a long fit's run and iteration on stderr every few seconds "
                "(default: on when stderr is a terminal)"),
        _option("-v", "--verbose", action="count", default=0,
                help="print each iteration's line"),
    )),
    ("info", "print how the native core was built", "cmd_info", ()),
    ("reproduce", "check the theory's claims on real and synthetic data; write report.md, "
     "results.csv and figures", "cmd_reproduce", (
        _option("--quick", action="store_true",
                help="scikit-learn's bundled sets and synthetic data only, small grids "
                "(< 1 min: 16 s of CPU time)"),
        _option("--out", default=None, metavar="DIR", help="write the report here"),
        _option("--datasets", default=None, metavar="NAME,...", help="only these data sets"),
        _option("--claims", default=None, metavar="N,...", help="only these claims (1..8)"),
        _option("--seed", type=int, default=0, help="seed of every random choice (0)"),
        _THREADS,
        _option("--torch", action="store_true",
                help="run the PyTorch experiments 9-12 instead of the claims (needs torch; "
                "--claims selects among 9-12)"),
        _option("--list", action="store_true", help="list the data sets and exit"),
    )),
)  # fmt: skip


def build_parser():
    """The command line's parser, built from COMMANDS."""
    from . import __version__

    parser = _Parser(prog="softkmeans", description="Hard, softmax and entmax-1.5 K-Means.")
    parser.add_argument("--version", action="version", version=f"softkmeans {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{cluster,info,reproduce}")
    sub.required = True
    for name, help_text, function, options in COMMANDS:
        command = sub.add_parser(name, help=help_text)
        command.error = parser.error
        for flags, kwargs in options:
            command.add_argument(*flags, **kwargs)
        command.set_defaults(func=globals()[function])
    return parser


def main(argv=None):
    """Entry point; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():  # restores the filters and showwarning after
        warnings.simplefilter("default")
        warnings.showwarning = _one_line_warning  # warnings as one line, as the errors
        return _run(args)


def _run(args):
    try:
        return args.func(args)
    except UserError as exc:
        print(f"softkmeans: error: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TypeError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"softkmeans: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("softkmeans: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
