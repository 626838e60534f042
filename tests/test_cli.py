"""The softkmeans command line: run in-process through main(argv), once as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

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
    C = np.loadtxt(out_dir / "centroids_entmax15.csv", delimiter=",", ndmin=2)
    labels = np.loadtxt(out_dir / "labels_entmax15.csv", dtype=np.int64)
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
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "softkmeans", "cluster"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 5.0, f"softkmeans cluster took {elapsed:.1f} s"
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


def test_parquet_is_read_through_pyarrow(tmp_path, capsys, monkeypatch):
    # A stand-in for pyarrow.parquet (not a test dependency): the CLI's column checks.
    import types

    class Column:
        def __init__(self, values):
            self.values = np.asarray(values)

        def to_numpy(self):
            return self.values

    class Table:
        def __init__(self, cols):
            self.cols = cols
            self.column_names = list(cols)

        def column(self, name):
            return Column(self.cols[name])

    tables = {
        "good.parquet": Table({"a": np.arange(20.0), "b": np.arange(20) % 3}),
        "bad.parquet": Table({"a": np.arange(4.0), "name": np.array(["w", "x", "y", "z"])}),
    }
    parquet = types.ModuleType("pyarrow.parquet")
    parquet.read_table = lambda path: tables[str(path).rsplit("/", 1)[-1]]
    pyarrow = types.ModuleType("pyarrow")
    pyarrow.parquet = parquet
    monkeypatch.setitem(sys.modules, "pyarrow", pyarrow)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", parquet)
    for name in tables:
        (tmp_path / name).write_bytes(b"PAR1")
    code, out, err = run(["cluster", str(tmp_path / "good.parquet"), "-k", "2"], capsys)
    assert code == 0, err
    assert "20 x 2" in out
    code, out, err = run(["cluster", str(tmp_path / "bad.parquet"), "-k", "2"], capsys)
    assert code == 1 and "column name is not numeric" in err
