"""The softkmeans command line: run in-process through main(argv), once as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import only_reader
from softkmeans import cli
from softkmeans.datasets import load_iris


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _table_rows(out):
    return [
        ln.split()
        for ln in out.splitlines()
        if ln.split()[:1] in (["hard"], ["softmax"], ["entmax15"])
    ]


def test_cluster_without_arguments_uses_the_builtin_data(capsys):
    code, out, err = run(["cluster"], capsys)
    assert code == 0, err
    assert "Iris" in out
    rows = _table_rows(out)
    assert [r[0] for r in rows] == ["hard", "softmax", "entmax15"]
    # The hard row is Lloyd's: exactly Lloyd, J == objective.
    assert rows[0][-1] == "yes" and rows[0][1] == rows[0][2]
    assert rows[1][-1] == "no"


def test_builtin_data_is_fishers_iris():
    X, names, species = load_iris()
    assert X.shape == (150, 4) and len(names) == 4
    assert sorted(set(species)) == ["setosa", "versicolor", "virginica"]
    np.testing.assert_allclose(X.mean(axis=0), [5.8433, 3.0573, 3.758, 1.1993], atol=1e-3)


def test_cluster_writes_centroids_labels_and_summary(tmp_path, capsys):
    X = np.random.default_rng(0).normal(size=(60, 3))
    data = tmp_path / "x.npy"
    np.save(data, X)
    out_dir = tmp_path / "out"
    code, out, err = run(
        ["cluster", str(data), "-k", "4", "--assignment", "entmax15", "--out", str(out_dir)],
        capsys,
    )
    assert code == 0, err
    C = np.loadtxt(out_dir / "centroids_entmax15.csv", delimiter=",", ndmin=2, skiprows=1)
    labels = np.loadtxt(out_dir / "labels_entmax15.csv", dtype=np.int64, skiprows=1)
    assert (out_dir / "centroids_entmax15.csv").read_text().splitlines()[0] == "x0,x1,x2"
    assert (out_dir / "labels_entmax15.csv").read_text().splitlines()[0] == "label"
    assert C.shape == (4, 3) and labels.shape == (60,)
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["n_samples"] == 60 and summary["k"] == 4
    (res,) = summary["results"]
    assert res["assignment"] == "entmax15"
    # The written centroids and labels are consistent: J recomputed from them.
    J = ((X - C[labels]) ** 2).sum()
    assert J == pytest.approx(res["J"], rel=1e-9)


def test_cluster_reads_csv_with_header_and_txt(tmp_path, capsys):
    X = np.random.default_rng(1).normal(size=(30, 2))
    csv_path = tmp_path / "d.csv"
    csv_path.write_text("a,b\n" + "\n".join(f"{x},{y}" for x, y in X) + "\n")
    txt_path = tmp_path / "d.txt"
    np.savetxt(txt_path, X)
    for path in (csv_path, txt_path):
        code, out, err = run(["cluster", str(path), "-k", "2", "--assignment", "hard"], capsys)
        assert code == 0, err
        assert "30 x 2" in out


def test_cluster_with_annealing_ends_exactly_at_lloyd(capsys):
    code, out, err = run(
        ["cluster", "-k", "3", "--assignment", "softmax", "--anneal", "cooling=0.8,steps=50"],
        capsys,
    )
    assert code == 0, err
    (row,) = _table_rows(out)
    assert row[-1] == "yes"


def test_info(capsys):
    code, out, err = run(["info"], capsys)
    assert code == 0
    assert "compiler" in out and "simd_selected" in out and "openmp" in out


@pytest.mark.parametrize(
    ("make", "extra", "match"),
    [
        (None, ["missing.csv"], "not found"),
        ("one_d", [], "2-D"),
        ("text_col", [], "not numeric"),
        ("nan", [], "NaN"),
        (None, ["-k", "1000"], "larger than the number of points"),
        (None, ["--sigma", "-1"], "sigma"),
        (None, ["--anneal", "cooling"], "key=value"),
        (None, ["--anneal", "cooling=2"], "cooling"),
        ("bad_ext", [], "unknown format"),
    ],
)
def test_user_errors_give_one_line_and_non_zero_exit(tmp_path, capsys, make, extra, match):
    argv = ["cluster"]
    if make == "one_d":
        np.save(tmp_path / "v.npy", np.arange(5.0))
        argv.append(str(tmp_path / "v.npy"))
    elif make == "text_col":
        (tmp_path / "t.csv").write_text("x,name\n1.0,a\n2.0,b\n")
        argv.append(str(tmp_path / "t.csv"))
    elif make == "nan":
        (tmp_path / "n.csv").write_text("1.0,2.0\nnan,3.0\n")
        argv.append(str(tmp_path / "n.csv"))
    elif make == "bad_ext":
        (tmp_path / "d.xlsx").write_text("1,2\n")
        argv.append(str(tmp_path / "d.xlsx"))
    if extra and extra[0] == "missing.csv":
        extra = [str(tmp_path / "missing.csv")]
    code, out, err = run(argv + extra, capsys)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], err
    assert "Traceback" not in err


def test_parquet_without_pyarrow_is_a_user_error(tmp_path, capsys):
    try:
        import pyarrow  # noqa: F401

        pytest.skip("pyarrow is installed")
    except ImportError:
        pass
    (tmp_path / "d.parquet").write_bytes(b"PAR1")
    code, out, err = run(["cluster", str(tmp_path / "d.parquet")], capsys)
    assert code == 1 and "pyarrow" in err


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["cluster", "-k", "x"])
    assert exc.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_python_dash_m_runs_the_command_line():
    # No wall-clock bound here (speed is never asserted in tests): the start-up cost is
    # guarded by test_cluster_does_not_import_scikit_learn below.
    proc = subprocess.run(
        [sys.executable, "-m", "softkmeans", "cluster"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "entmax15" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "softkmeans", "cluster", "/nonexistent.npy"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1
    assert bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr


def test_cluster_does_not_import_scikit_learn():
    # The command line runs the driver directly: scikit-learn's import would double the
    # start-up time of `softkmeans cluster`.
    code = (
        "import sys; from softkmeans import cli; rc = cli.main(['cluster']); "
        "assert rc == 0; assert 'sklearn' not in sys.modules, 'sklearn imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_parquet_is_read_through_pyarrow(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    good = pa.table({"a": np.arange(20.0), "b": np.arange(20) % 3})
    bad = pa.table({"a": np.arange(4.0), "name": ["w", "x", "y", "z"]})
    pq.write_table(good, tmp_path / "good.parquet")
    pq.write_table(bad, tmp_path / "bad.parquet")
    code, out, err = run(["cluster", str(tmp_path / "good.parquet"), "-k", "2"], capsys)
    assert code == 0, err
    assert "20 x 2" in out
    code, out, err = run(["cluster", str(tmp_path / "bad.parquet"), "-k", "2"], capsys)
    assert code == 1 and "column 'name' (number 2) is not numeric" in err


# ---------------------------------------------------------------- real files (issue 26)


def _blobs_csv(path, n=40, header="a,b,c", fmt="{:.3f}", index=False, seed=0):
    X = np.random.default_rng(seed).normal(size=(n, 3)) + 5 * (np.arange(n) % 2)[:, None]
    lines = [header] if header is not None else []
    for i, row in enumerate(X):
        cells = [fmt.format(v) for v in row]
        lines.append(",".join(([str(i)] if index else []) + cells))
    path.write_text("\n".join(lines) + "\n")
    return np.array([[float(fmt.format(v)) for v in row] for row in X])


def _err_lines(err):
    return [ln for ln in err.strip().splitlines() if ln]


def test_a_header_of_numbers_above_decimals_is_detected_and_noted(tmp_path, capsys):
    path = tmp_path / "years.csv"
    X = _blobs_csv(path, header="2019,2020,2021")
    code, out, err = run(["cluster", str(path), "-k", "2", "--assignment", "hard"], capsys)
    assert code == 0, err
    assert "40 x 3" in out
    (line,) = _err_lines(err)
    assert line.startswith("softkmeans: note:") and "header of numbers" in line
    code, out, err = run(["cluster", str(path), "-k", "2", "--no-header"], capsys)
    assert code == 0 and "41 x 3" in out and err == ""
    code, out, err = run(
        ["cluster", str(path), "-k", "2", "--header", "--out", str(tmp_path)], capsys
    )
    assert code == 0 and "40 x 3" in out
    head = (tmp_path / "centroids_hard.csv").read_text().splitlines()[0]
    assert head == "2019,2020,2021"
    assert X.shape == (40, 3)


def test_a_first_row_of_numbers_that_stands_out_is_read_as_data_with_a_warning(tmp_path, capsys):
    path = tmp_path / "ints.csv"
    rows = ["2019,2020,2021"] + [f"{i % 7},{i % 5},{i % 3}" for i in range(30)]
    path.write_text("\n".join(rows) + "\n")
    code, out, err = run(["cluster", str(path), "-k", "2", "--assignment", "hard"], capsys)
    assert code == 0, err
    assert "31 x 3" in out
    (line,) = _err_lines(err)
    assert line.startswith("softkmeans: warning:") and "--header" in line
    code, out, err = run(["cluster", str(path), "-k", "2", "--header"], capsys)
    assert code == 0 and "30 x 3" in out and err == ""


def test_a_pandas_index_column_is_dropped_with_a_note(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    X = np.random.default_rng(3).normal(size=(50, 2))
    path = tmp_path / "frame.csv"
    pd.DataFrame(X, columns=["u", "v"]).to_csv(path)  # index=True: ",u,v" and 0..49
    out_dir = tmp_path / "out"
    argv = ["cluster", str(path), "-k", "2", "--assignment", "hard", "--out", str(out_dir)]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "50 x 2" in out
    (line,) = _err_lines(err)
    assert line.startswith("softkmeans: note:") and "index" in line and "dropped" in line
    assert (out_dir / "centroids_hard.csv").read_text().splitlines()[0] == "u,v"
    # Named in --columns, it is kept; the columns by name or 1-based number.
    code, out, err = run(argv[:-2] + ["--columns", "1,u,v"], capsys)
    assert code == 0 and "50 x 3" in out and err == ""
    code, out, err = run(argv[:-2] + ["--columns", "v"], capsys)
    assert code == 0 and "50 x 1" in out
    code, out, err = run(argv[:-2] + ["--columns", "w"], capsys)
    assert code == 1 and "no column 'w'" in err and len(_err_lines(err)) == 1


def test_out_is_checked_before_the_fit(tmp_path, capsys, monkeypatch):
    from softkmeans.fit import driver

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before checking --out")

    monkeypatch.setattr(driver.Fitter, "fit", no_fit)
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out, err = run(["cluster", "--out", str(blocker / "sub")], capsys)
    assert code == 1 and out == ""
    (line,) = _err_lines(err)
    assert line.startswith("softkmeans: error: cannot write to")


def test_probabilities_standardization_and_headers_are_written(tmp_path, capsys):
    path = tmp_path / "d.csv"
    X = _blobs_csv(path, n=60)
    X[:, 2] *= 1000.0
    np.save(tmp_path / "d.npy", X)
    out_dir = tmp_path / "out"
    argv = ["cluster", str(tmp_path / "d.npy"), "-k", "2", "--assignment", "softmax"]
    code, out, err = run(argv + ["--standardize", "--proba", "--out", str(out_dir)], capsys)
    assert code == 0, err
    assert "standardized" in out
    lines = (out_dir / "proba_softmax.csv").read_text().splitlines()
    assert lines[0] == "cluster0,cluster1" and len(lines) == 61
    R = np.loadtxt(out_dir / "proba_softmax.csv", delimiter=",", skiprows=1)
    np.testing.assert_allclose(R.sum(axis=1), 1.0, rtol=1e-6)
    # Fitted on z-scores, written in the data's units: the labels are those of the
    # fit on z-scores, and each centroid is the mean of its points in the data's units.
    labels = np.loadtxt(out_dir / "labels_softmax.csv", dtype=np.int64, skiprows=1)
    C = np.loadtxt(out_dir / "centroids_softmax.csv", delimiter=",", skiprows=1)
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    from softkmeans.fit.driver import Fitter
    from softkmeans.fit.params import FitParams

    ref = Fitter(FitParams(n_clusters=2, assignment="softmax", random_state=0)).fit(Z)
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_allclose(C, ref.cluster_centers_ * X.std(axis=0) + X.mean(axis=0))
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["standardized"] is True and summary["columns"] == ["x0", "x1", "x2"]


@pytest.mark.parametrize("reader", ["pandas.read_csv", "pyarrow.csv", "numpy.loadtxt"])
def test_every_reader_gives_the_same_table(tmp_path, monkeypatch, reader):
    from softkmeans.reading import read_table

    only_reader(monkeypatch, reader)
    path = tmp_path / "d.csv"
    X = _blobs_csv(path, n=25, fmt="{:.17g}")
    table = read_table(str(path))
    assert table.reader == reader
    assert table.names == ["a", "b", "c"]
    np.testing.assert_array_equal(table.X, X)
    assert table.X.flags.c_contiguous
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1.0,2.0\n3.0,x\n")
    with pytest.raises(ValueError, match="not numeric"):
        read_table(str(bad))


def test_npz_and_parquet_from_pandas(tmp_path, capsys):
    X = np.random.default_rng(5).normal(size=(30, 2))
    np.savez(tmp_path / "one.npz", X)
    np.savez(tmp_path / "named.npz", X=X, y=np.arange(30))
    np.savez(tmp_path / "two.npz", a=X, b=X)
    for name in ("one", "named"):
        code, out, err = run(["cluster", str(tmp_path / f"{name}.npz"), "-k", "2"], capsys)
        assert code == 0 and "30 x 2" in out, err
    code, out, err = run(["cluster", str(tmp_path / "two.npz"), "-k", "2"], capsys)
    assert code == 1 and "name the data X" in err
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame(X, columns=["p", "q"], index=np.arange(30) * 2)
    frame.to_parquet(tmp_path / "f.parquet")  # a non-range index is stored as a column
    code, out, err = run(["cluster", str(tmp_path / "f.parquet"), "-k", "2"], capsys)
    assert code == 0 and "30 x 2" in out, err


def test_version_and_help_for_every_option(capsys):
    from softkmeans import __version__

    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"softkmeans {__version__}"
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in subparsers.items():
        for action in sub._actions:
            assert action.help, f"softkmeans {name} {action.option_strings or action.dest}"


def test_warnings_print_as_one_line_like_the_errors(tmp_path, capsys):
    np.save(tmp_path / "dup.npy", np.repeat([[0.0, 0.0], [1.0, 1.0]], 10, axis=0))
    code, out, err = run(["cluster", str(tmp_path / "dup.npy"), "-k", "3"], capsys)
    assert code == 0, err
    lines = _err_lines(err)
    assert lines and all(ln.startswith("softkmeans: warning: ") for ln in lines), err


@pytest.mark.parametrize("has_matplotlib", [False, True])
def test_reproduce_says_whether_it_drew_figures(tmp_path, monkeypatch, capsys, has_matplotlib):
    """Without matplotlib the command said it wrote figures/ (empty); it says it drew none."""
    import sys
    import types

    monkeypatch.setattr(cli, "_reproduce_rows", lambda args, names, claims: [])
    fake = types.ModuleType("matplotlib") if has_matplotlib else None
    monkeypatch.setitem(sys.modules, "matplotlib", fake)
    assert cli.main(["reproduce", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert ("and figures/ to" in out) == has_matplotlib
    assert ("no figures (matplotlib is not installed" in out) != has_matplotlib
