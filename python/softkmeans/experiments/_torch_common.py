"""What the PyTorch experiments (9-12) share: the experiment record, the lazy imports,
the tables."""

from __future__ import annotations

import csv

QUICK_BUDGET = 300  # iterations of experiment 10 with --quick (tests lower it)


class Experiment:
    """What report.write needs of a claim module: NUMBER, TITLE, a docstring, run."""

    def __init__(self, number, title, fn):
        self.NUMBER, self.TITLE, self.run = number, title, fn
        self.__doc__ = fn.__doc__


def _torch():
    import torch

    return torch


def _skt():
    from softkmeans import torch as skt

    return skt


def _table(ctx, name, ds, head, body):
    """(title, head, body) for report.md; also written to tables/<name>_<ds>.csv."""
    if ctx.out_dir is not None:
        folder = ctx.out_dir / "tables"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{name}_{ds.name}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(head)
            writer.writerows(body)
    return (f"{name} on {ds.name}", head, body)


def _rows(ctx):
    """Rows of a data set an experiment uses at most (a seeded subsample beyond)."""
    return 1000 if ctx.quick else 5000


def _g(x):
    return "-" if x is None else (f"{x:.3g}" if isinstance(x, float) else str(x))
