"""Data files for the ``softkmeans`` command: a numeric table (n, d) and its column names.

Read by a well-kept library, never cell by cell in Python: CSV/TSV/TXT by
``pandas.read_csv`` (its C parser) when pandas is installed, else by pyarrow's CSV reader,
else by ``numpy.loadtxt``; Parquet by pyarrow; .npy and .npz by NumPy. Peak memory is
about twice the table's float64 size (the reader's columns and the (n, d) array made of
them); figures: ``python bench/csv_load.py``.

What the first rows of a text file say is decided from a sample of its first lines:

- the delimiter (``,``, ``;``, tab, else runs of white space);
- the header (``header=None``: detected): a first row with a cell that is not a number is
  a header; a first row of numbers is a header of numbers (``2019,2020,2021``) when its
  cells are integers where some column of the rows below has decimals in every sampled
  row (noted); a first row of numbers whose values lie outside the range of the rows
  below in most columns is read as data, with a warning that it may be a header;
- an index column (pandas' ``to_csv``): a first column whose header cell is empty (or
  ``Unnamed: 0``, ``index``) or absent, holding 0, 1, ..., n - 1, is dropped with a
  notice (``columns`` keeps what it names). Parquet's ``__index_level_0__`` too.

Errors are `DataError` (a ValueError) with one line of text; notices and warnings are
returned in `Table.notes` / `Table.warnings` for the caller to print.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re

import numpy as np

__all__ = ["DataError", "Table", "read_table"]

# Lines sampled for the delimiter, the header and the index column.
_SAMPLE_LINES = 200
_INDEX_NAMES = ("", "unnamed: 0", "index")
_NUMBER = re.compile(
    r"^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|nan|inf|infinity)$", re.I
)
_INTEGER = re.compile(r"^[+-]?\d+$")


class DataError(ValueError):
    """A data file that cannot be read as a numeric table (one line of text)."""


@dataclasses.dataclass
class Table:
    X: np.ndarray  # (n, d) float64, finite
    names: list  # d column names
    reader: str  # what read it
    notes: list = dataclasses.field(default_factory=list)
    warnings: list = dataclasses.field(default_factory=list)


def read_table(path, *, header=None, columns=None):
    """The numeric table in ``path``: .csv/.tsv/.txt, .parquet, .npy or .npz.

    header: None (detected), True or False (text files). columns: None or a list of
    column names or 1-based column numbers to keep (in that order).
    """
    if not os.path.exists(path):
        raise DataError(f"DATA file not found: {path}")
    if os.path.isdir(path):
        raise DataError(f"DATA is a directory, not a file: {path}")
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext in (".csv", ".txt", ".tsv"):
            table = _read_text(path, header, drop_index=columns is None)
        elif ext == ".parquet":
            table = _read_parquet(path)
        elif ext in (".npy", ".npz"):
            table = _read_numpy(path, ext)
        else:
            raise DataError(
                f"{path}: unknown format {ext!r} (use .csv, .tsv, .txt, .parquet, .npy or .npz)"
            )
    except DataError:
        raise
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read: {_one_line(exc)}") from None
    if columns is not None:
        table = _select(table, columns, path)
    X = table.X
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise DataError(f"{path}: data is empty (shape {X.shape})")
    if not np.isfinite(X).all():
        bad = np.argwhere(~np.isfinite(X))[0]
        raise DataError(
            f"{path}: data contains NaN, infinity or an empty cell "
            f"(row {bad[0] + 1}, column {table.names[bad[1]]})"
        )
    return table


def _one_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ----------------------------------------------------------------------------- text


def _sample(path):
    """The first non-blank, non-comment lines of a text file."""
    lines = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in itertools.islice(f, 20 * _SAMPLE_LINES):
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append(line.rstrip("\r\n"))
                if len(lines) >= _SAMPLE_LINES:
                    break
    return lines


def _delimiter(first):
    return next((d for d in (",", ";", "\t") if d in first), None)


def _split(line, delimiter):
    cells = line.split(delimiter) if delimiter is not None else line.split()
    return [c.strip().strip('"').strip() for c in cells]


def _decide_header(rows, header, path, table_warnings, notes):
    """True when the first sampled row is a header (see the module's docstring)."""
    if header is not None:
        return header
    first, below = rows[0], rows[1:]
    if not all(_NUMBER.match(c) for c in first if c != "") or "" in first[1:]:
        return True
    if not below:
        return False
    if all(_INTEGER.match(c) for c in first if c):
        decimals = [
            j
            for j in range(len(first))
            if all(j < len(r) and _NUMBER.match(r[j]) and not _INTEGER.match(r[j]) for r in below)
        ]
        if decimals:
            notes.append(
                f"{path}: the first row ({','.join(first[:6])}{',...' if len(first) > 6 else ''})"
                " is read as a header of numbers: integers above columns of decimals "
                "(--no-header reads it as data)"
            )
            return True
    # All numbers, nothing to tell them apart: data, unless they stand out.
    try:
        top = np.array([float(c) for c in first])
        body = np.array([[float(c) for c in r] for r in below if len(r) == len(first)])
    except ValueError:
        return False
    if body.shape[0] >= 2:
        outside = (top < body.min(axis=0)) | (top > body.max(axis=0))
        if outside.mean() > 0.5:
            table_warnings.append(
                f"{path}: the first row ({','.join(first[:6])}) is read as data, but its "
                "values lie outside the range of the rows below in most columns: if it is "
                "a header, pass --header"
            )
    return False


def _read_text(path, header, drop_index):
    lines = _sample(path)
    if not lines:
        raise DataError(f"{path}: no data rows")
    delimiter = _delimiter(lines[0])
    rows = [_split(ln, delimiter) for ln in lines]
    notes, warns = [], []
    has_header = _decide_header(rows, header, path, warns, notes)
    if has_header and len(rows) == 1:
        raise DataError(f"{path}: no data rows after the header")
    names = rows[0] if has_header else [f"x{j}" for j in range(len(rows[0]))]
    commented = _has_comments(path)
    X, reader = _parse(path, delimiter, has_header, len(names), commented)
    if X.ndim == 1:
        X = X.reshape(-1, 1) if len(names) == 1 else X.reshape(1, -1)
    if X.shape[1] != len(names):
        raise DataError(f"{path}: rows have {X.shape[1]} columns, the first {len(names)}")
    table = Table(X, list(names), reader, notes, warns)
    return _drop_index(table, path, has_header) if drop_index else table


def _has_comments(path):
    with open(path, "rb") as f:
        return b"#" in f.read(1 << 16)


def _parse(path, delimiter, has_header, width, commented):
    """(X float64 (n, d) C-ordered, the reader's name): pandas' C parser when pandas is
    installed (the fastest of the three here: 1e6 x 16, bench/csv_load.py), else
    pyarrow's (a single-character delimiter, no comment lines), else numpy.loadtxt."""
    try:
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None:
        try:
            df = pd.read_csv(
                path,
                sep=delimiter if delimiter is not None else r"\s+",
                header=0 if has_header else None,
                comment="#",
                skip_blank_lines=True,
                dtype=np.float64,
                engine="c",
            )
        except ValueError as exc:
            raise DataError(f"{path}: {_not_numeric(exc)}") from None
        # One (d, n) block: to_numpy is its transposed view, copied once into rows.
        return np.ascontiguousarray(df.to_numpy(dtype=np.float64)), "pandas.read_csv"
    if delimiter is not None and not commented:
        try:
            from pyarrow import csv as pacsv
        except ImportError:
            pacsv = None
        if pacsv is not None:
            return _parse_pyarrow(pacsv, path, delimiter, has_header, width), "pyarrow.csv"
    try:
        X = np.loadtxt(path, delimiter=delimiter, skiprows=int(has_header), comments="#",
                       ndmin=2, dtype=np.float64)  # fmt: skip
    except ValueError as exc:
        raise DataError(f"{path}: {_not_numeric(exc)}") from None
    return X, "numpy.loadtxt"


def _not_numeric(exc):
    text = _one_line(exc)
    if "could not convert" in text or "Unable to parse" in text:
        return f"a column is not numeric ({text})"
    return text


def _parse_pyarrow(pacsv, path, delimiter, has_header, width):
    import pyarrow as pa

    read = pacsv.ReadOptions(autogenerate_column_names=not has_header)
    parse = pacsv.ParseOptions(delimiter=delimiter)
    try:
        table = pacsv.read_csv(path, read_options=read, parse_options=parse)
    except pa.ArrowInvalid as exc:
        raise DataError(f"{path}: {_one_line(exc)}") from None
    return _columns_to_array(table, path)


def _columns_to_array(table, path):
    """(n, d) float64 from a pyarrow Table, one column at a time; a column that is not
    numeric is named with its first bad cell."""
    import pyarrow as pa

    n, d = table.num_rows, table.num_columns
    X = np.empty((n, d), dtype=np.float64)
    for j, name in enumerate(table.column_names):
        col = table.column(j)
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
                or pa.types.is_boolean(col.type) or pa.types.is_null(col.type)):  # fmt: skip
            values = col.to_pylist()
            row = next(i for i, v in enumerate(values) if not _is_number(v))
            raise DataError(
                f"{path}: column {name} is not numeric (row {row + 1}: {values[row]!r})"
            )
        X[:, j] = col.to_numpy(zero_copy_only=False) if col.null_count == 0 else (
            col.cast(pa.float64()).to_numpy(zero_copy_only=False)
        )  # fmt: skip
    return X


def _is_number(v):
    if v is None:
        return True
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def _drop_index(table, path, has_header):
    """Drop a first column 0..n-1 under an empty/index header cell or no header."""
    X = table.X
    if X.shape[1] < 2:
        return table
    name = table.names[0]
    if has_header and name.strip().lower() not in _INDEX_NAMES:
        return table
    n = X.shape[0]
    first = X[:, 0]
    if n >= 2 and np.array_equal(first, np.arange(n)):
        label = f"{name!r}" if has_header else "1"
        table.notes.append(
            f"{path}: column {label} is an index (0, 1, ..., {n - 1}, as pandas' to_csv "
            "writes it) and is dropped (--columns keeps what it names)"
        )
        table.X = np.ascontiguousarray(X[:, 1:])
        table.names = table.names[1:]
    return table


# ----------------------------------------------------------------------------- binary


def _read_parquet(path):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"{path}: reading .parquet needs pyarrow (pip install pyarrow)") from None
    table = pq.read_table(path)
    notes = []
    if "__index_level_0__" in table.column_names:
        table = table.drop(["__index_level_0__"])
        notes.append(f"{path}: pandas' index column __index_level_0__ is dropped")
    if table.num_columns == 0:
        raise DataError(f"{path}: no columns")
    return Table(_columns_to_array(table, path), list(table.column_names), "pyarrow.parquet", notes)


def _read_numpy(path, ext):
    data = np.load(path, allow_pickle=False)
    if ext == ".npz":
        with data:
            keys = list(data.keys())
            key = "X" if "X" in keys else (keys[0] if len(keys) == 1 else None)
            if key is None:
                raise DataError(f"{path}: {len(keys)} arrays ({', '.join(keys)}); name the data X")
            data = data[key]
    if data.ndim != 2:
        raise DataError(f"{path}: data must be a 2-D table (n, d); got shape {data.shape}")
    if data.dtype.kind not in "biuf":
        raise DataError(f"{path}: data must be numeric; got dtype {data.dtype}")
    X = np.asarray(data, dtype=np.float64)
    return Table(X, [f"x{j}" for j in range(X.shape[1])], "numpy.load")


def _select(table, columns, path):
    index = []
    for c in columns:
        if c in table.names:
            index.append(table.names.index(c))
        elif c.isdigit() and 1 <= int(c) <= len(table.names):
            index.append(int(c) - 1)
        else:
            raise DataError(
                f"{path}: no column {c!r} (columns: {', '.join(table.names[:20])}"
                f"{', ...' if len(table.names) > 20 else ''}; or numbers 1..{len(table.names)})"
            )
    table.X = np.ascontiguousarray(table.X[:, index])
    table.names = [table.names[j] for j in index]
    return table
