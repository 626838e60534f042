"""verbose=1 reports the k-means++ seeding while it runs (issue 36, item 14): a line at
most every SEEDING_LINE_EVERY seconds (12.6 s of silence at k = 1000 on main)."""

from __future__ import annotations

import re

import numpy as np

from softkmeans import SoftKMeans
from softkmeans.fit import progress

LINE = re.compile(r"^k-means\+\+: (\d+) of (\d+) centres chosen  time=[0-9.]+s$")


def _fit_output(capsys, **kwargs):
    X = np.random.default_rng(0).normal(size=(300, 3))
    SoftKMeans(6, assignment="hard", random_state=0, verbose=1, **kwargs).fit(X)
    return capsys.readouterr().out.splitlines()


def test_a_slow_seeding_prints_its_progress_before_the_iterations(monkeypatch, capsys):
    monkeypatch.setattr(progress, "SEEDING_LINE_EVERY", 0.0)  # every centre "slow"
    lines = _fit_output(capsys)
    seeding = [m for line in lines if (m := LINE.match(line))]
    assert [int(m[1]) for m in seeding] == [1, 2, 3, 4, 5, 6]
    assert all(int(m[2]) == 6 for m in seeding)
    assert lines.index("Initialization complete") == len(seeding)


def test_a_quick_seeding_keeps_scikit_learns_lines(capsys):
    lines = _fit_output(capsys)  # well under a second: no seeding line
    assert lines[0] == "Initialization complete"
    assert not any(LINE.match(line) for line in lines)


def test_no_seeding_line_without_verbose_or_without_k_means_plus_plus(monkeypatch, capsys):
    monkeypatch.setattr(progress, "SEEDING_LINE_EVERY", 0.0)
    X = np.random.default_rng(0).normal(size=(300, 3))
    SoftKMeans(6, assignment="hard", random_state=0).fit(X)
    assert capsys.readouterr().out == ""
    assert not any(LINE.match(line) for line in _fit_output(capsys, init="random"))
