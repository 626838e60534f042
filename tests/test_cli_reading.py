"""What a new user trips over in `softkmeans cluster` (issue 36, items 4, 5, 14, 16): index
and id columns, a first row with an empty cell, --columns past a text column, --proba
without --out, progress on long runs, errors that name the column. The expected tables
are the DataFrames' own values (pandas wrote the files), never the reader's output."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest

from conftest import only_reader
from softkmeans import cli
from softkmeans.reading import read_table

pd = pytest.importorskip("pandas")

READERS = ["pandas.read_csv", "pyarrow.csv", "numpy.loadtxt"]


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _frame(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)) + 4.0 * (np.arange(n) % 2)[:, None]
    return pd.DataFrame(X, columns=["u", "v"])


@pytest.mark.parametrize("which", ["shuffled", "filtered", "id index", "id column"])
def test_an_index_that_is_not_0_to_n_minus_1_is_dropped_with_a_note(tmp_path, capsys, which):
    """Item 4: only an index holding exactly 0..n-1 was dropped; a shuffled or filtered
    frame's index, or an id, was clustered as a feature with no word."""
    frame = _frame()
    path = tmp_path / "frame.csv"
    if which == "shuffled":
        frame = frame.sample(frac=1.0, random_state=0)
        frame.to_csv(path)
    elif which == "filtered":
        frame = frame[frame.u > 0.5]
        frame.to_csv(path)
    else:
        frame.insert(0, "id", np.random.default_rng(1).permutation(1000)[: len(frame)] + 7)
        frame.set_index("id").to_csv(path, index=which == "id index")
        if which == "id column":
            frame.to_csv(path, index=False)
        frame = frame.drop(columns="id")
    table = read_table(str(path))
    np.testing.assert_array_equal(table.X, frame[["u", "v"]].to_numpy())
    assert table.names == ["u", "v"]
    (line,) = table.notes
    assert "dropped" in line and ("index" in line or "id" in line)
    code, out, err = run(["cluster", str(path), "-k", "2", "--assignment", "hard"], capsys)
    assert code == 0 and f"{len(frame)} x 2" in out and "softkmeans: note:" in err
    # Named in --columns, it is kept.
    code, out, err = run(["cluster", str(path), "-k", "2", "--columns", "1,u,v"], capsys)
    assert code == 0 and f"{len(frame)} x 3" in out


def test_parquet_index_columns_come_from_pandas_metadata(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    frame = _frame()
    frame.index = np.random.default_rng(2).permutation(len(frame)) * 3 + 11
    frame.index.name = "id"
    frame.to_parquet(tmp_path / "f.parquet")  # a non-range index is stored as column "id"
    code, out, err = run(["cluster", str(tmp_path / "f.parquet"), "-k", "2"], capsys)
    assert code == 0 and "40 x 2" in out and "'id'" in err, err
    table = read_table(str(tmp_path / "f.parquet"))
    np.testing.assert_array_equal(table.X, frame.to_numpy())


@pytest.mark.parametrize("reader", READERS)
def test_a_headerless_index_column(tmp_path, monkeypatch, reader):
    """Without a header: 0..n-1 in any order is an index (dropped, noted); increasing ids
    that are not 0..n-1 may be one (kept, warned); anything else is data, silently."""
    frame = _frame(n=30).sample(frac=1.0, random_state=3)
    shuffled, increasing = tmp_path / "s.csv", tmp_path / "i.csv"
    frame.to_csv(shuffled, header=False)
    frame.set_axis(np.arange(30) * 2 + 100).to_csv(increasing, header=False)
    only_reader(monkeypatch, reader)
    table = read_table(str(shuffled))
    np.testing.assert_array_equal(table.X, frame.to_numpy())
    assert len(table.notes) == 1 and not table.warnings
    table = read_table(str(increasing))
    assert table.X.shape == (30, 3) and not table.notes
    (warning,) = table.warnings
    assert "like an index" in warning and "--columns" in warning


@pytest.mark.parametrize("reader", READERS)
def test_a_first_row_with_an_empty_cell_is_data_not_a_header(tmp_path, monkeypatch, reader):
    """Item 5: "1.5,,3.5" above rows of numbers was taken for a header and dropped."""
    path = tmp_path / "gap.csv"
    rows = ["1.5,,3.5"] + [f"{i}.25,{i}.5,{i}.75" for i in range(10)]
    path.write_text("\n".join(rows) + "\n")
    only_reader(monkeypatch, reader)
    with pytest.raises(ValueError, match=r"an empty cell \(row 1, column x1\)"):
        read_table(str(path))
    # A header of numbers may still leave its first cell empty (pandas' index header).
    years = tmp_path / "years.csv"
    years.write_text(",2019,2020\n" + "".join(f"{i},{i}.5,{i}.25\n" for i in range(10)))
    table = read_table(str(years))
    assert table.names == ["2019", "2020"] and table.X.shape == (10, 2)


@pytest.mark.parametrize("reader", READERS)
def test_columns_skip_a_text_column(tmp_path, monkeypatch, reader):
    """Item 14: --columns u,v failed on a text column it leaves out."""
    frame = _frame()
    frame.insert(1, "name", [f"row {i}" for i in range(len(frame))])
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    vu = frame[["v", "u"]].to_numpy()
    only_reader(monkeypatch, reader)
    table = read_table(str(path), columns=["v", "u"])
    np.testing.assert_array_equal(table.X, vu)
    assert table.names == ["v", "u"]
    table = read_table(str(path), columns=["3"])
    np.testing.assert_array_equal(table.X, vu[:, :1])
    with pytest.raises(ValueError, match=r"column 'name' \(number 2\) is not numeric"):
        read_table(str(path))


def test_columns_skip_a_text_column_in_parquet(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    frame = _frame()
    frame["name"] = [f"row {i}" for i in range(len(frame))]
    frame.to_parquet(tmp_path / "t.parquet")
    table = read_table(str(tmp_path / "t.parquet"), columns=["v", "1"])
    np.testing.assert_array_equal(table.X, frame[["v", "u"]].to_numpy())
    code, out, err = run(["cluster", str(tmp_path / "t.parquet"), "--columns", "u,v"], capsys)
    assert code == 0 and "40 x 2" in out, err


def test_a_parquet_error_names_the_column(tmp_path, capsys):
    """Item 16: "column name is not numeric (row 1: ...)" read as if the column's *name*
    were at fault; numbers stored as text raised StopIteration (a traceback)."""
    pytest.importorskip("pyarrow")
    frame = _frame(n=5)
    frame["name"] = ["a", "b", "c", "d", "e"]
    frame.to_parquet(tmp_path / "text.parquet")
    code, out, err = run(["cluster", str(tmp_path / "text.parquet"), "-k", "2"], capsys)
    assert code == 1 and "column 'name' (number 3) is not numeric (row 1: 'a')" in err
    frame["name"] = ["1.5", "2", "3", "4", "5"]
    frame.to_parquet(tmp_path / "strings.parquet")
    code, out, err = run(["cluster", str(tmp_path / "strings.parquet"), "-k", "2"], capsys)
    assert code == 1 and "column 'name' (number 3) holds numbers stored as text" in err


def test_proba_without_out_is_an_error_before_the_fit(capsys, monkeypatch):
    """Item 14: --proba without --out did nothing at all."""
    from softkmeans.fit import driver

    monkeypatch.setattr(driver.Fitter, "fit", lambda *a, **k: pytest.fail("fitted"))
    code, out, err = run(["cluster", "--proba"], capsys)
    assert code == 1 and out == ""
    assert err.strip() == "softkmeans: error: --proba writes proba_*.csv and needs --out DIR"


def test_progress_reports_each_run_and_iteration(capsys, monkeypatch):
    """Item 14: a long run printed nothing until its table. With the spacing at zero every
    task event is a line; the default spacing keeps short fits silent."""
    code, out, err = run(["cluster", "-k", "3", "--assignment", "hard", "--progress"], capsys)
    assert code == 0 and err == ""  # a fit of Iris ends before the first line is due
    for name in ("PROGRESS_AFTER", "PROGRESS_EVERY", "PROGRESS_GROWTH"):
        monkeypatch.setattr(cli, name, 0.0)
    code, out, err = run(["cluster", "--assignment", "softmax", "--progress"], capsys)
    lines = err.strip().splitlines()
    assert code == 0 and lines, err
    # The heartbeat may report "starting" before the first run begins (a thread: timing).
    lines = [ln for ln in lines if not ln.startswith("softkmeans: softmax: starting [")]
    assert all(ln.startswith("softkmeans: softmax: run 1") for ln in lines), err
    assert "softkmeans: softmax: run 1, initializing [" in lines[0]
    n_iter = int(next(r for r in out.splitlines() if r.startswith("softmax")).split()[3])
    assert any(f"run 1, iteration {n_iter} [" in ln for ln in lines), err
    code, out, err = run(["cluster", "--assignment", "hard", "--no-progress"], capsys)
    assert code == 0 and err == ""


def test_progress_heartbeat_reports_a_silent_stretch(monkeypatch):
    """Between task events (k-means++ seeding, a long native pass) the heartbeat thread
    repeats the last place."""
    monkeypatch.setattr(cli, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(cli, "PROGRESS_EVERY", 0.02)
    monkeypatch.setattr(cli, "PROGRESS_GROWTH", 0.0)
    stream = io.StringIO()
    with cli.FitProgress("hard", stream=stream) as progress:
        progress.subtask("run 0").begin()  # printed at once
        time.sleep(0.5)  # no event: only the heartbeat can print
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3 and all("softkmeans: hard: run 1, initializing [" in ln for ln in lines)
