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
  row (noted); an empty cell does not make a row a header (a row of numbers with a gap is
  data, and its empty cell is then reported); a first row of numbers whose values lie
  outside the range of the rows below in most columns is read as data, with a warning
  that it may be a header;
- an index column (pandas' ``to_csv``, a filtered or shuffled frame included): a first
  column of distinct integers whose header cell is empty, absent (a header one cell
  short), ``Unnamed: 0``, ``index`` or ``id``, or, without a header, a first column
  holding 0, ..., n - 1 in any order, is dropped with a notice; a headerless first column
  of increasing distinct integers is kept with a warning. Parquet: the columns pandas'
  metadata lists as the index, and the same rule for the first column.

``columns`` selects by name or 1-based number before anything is converted, so a column
left out may hold text; it also keeps an index column it names.

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
_INDEX_NAMES = ("", "unnamed: 0", "index", "id")
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
            table = _read_text(path, header, columns)
        elif ext == ".parquet":
            table = _read_parquet(path, columns)
        elif ext in (".npy", ".npz"):
            table = _read_numpy(path, ext, columns)
        else:
            raise DataError(
                f"{path}: unknown format {ext!r} (use .csv, .tsv, .txt, .parquet, .npy or .npz)"
            )
    except DataError:
        raise
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read: {_one_line(exc)}") from None
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
    if not all(_NUMBER.match(c) for c in first if c != ""):
        return True
    if not below:
        return False
    # A header of numbers may leave its first cell empty (pandas' index); a gap further
    # on is a missing value in a row of data.
    if all(_INTEGER.match(c) for c in first[1:]) and (first[0] == "" or _INTEGER.match(first[0])):
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


def _read_text(path, header, columns):
    lines = _sample(path)
    if not lines:
        raise DataError(f"{path}: no data rows")
    delimiter = _delimiter(lines[0])
    rows = [_split(ln, delimiter) for ln in lines]
    notes, warns = [], []
    has_header = _decide_header(rows, header, path, warns, notes)
    if has_header and len(rows) == 1:
        raise DataError(f"{path}: no data rows after the header")
    names = _names(rows, has_header)
    wanted = None if columns is None else _resolve(columns, names, path)
    commented = _has_comments(path)
    X, reader = _parse(path, delimiter, has_header, names, commented, wanted)
    if X.ndim == 1:
        X = X.reshape(-1, 1) if len(names) == 1 else X.reshape(1, -1)
    if wanted is None and X.shape[1] != len(names):
        raise DataError(f"{path}: rows have {X.shape[1]} columns, the first {len(names)}")
    table = Table(X, names if wanted is None else [names[j] for j in wanted], reader, notes, warns)
    return _drop_index(table, path, has_header) if columns is None else table


def _names(rows, has_header):
    """The column names: the header's cells (with an unnamed first column when the header
    is one cell short, as pandas writes an index without a name), else x0, x1, ..."""
    if not has_header:
        return [f"x{j}" for j in range(len(rows[0]))]
    names = list(rows[0])
    if len(rows) > 1 and len(rows[1]) == len(names) + 1:
        names.insert(0, "")
    return names


def _has_comments(path):
    with open(path, "rb") as f:
        return b"#" in f.read(1 << 16)


def _parse(path, delimiter, has_header, names, commented, wanted):
    """(X float64 (n, d) C-ordered, the reader's name): pandas' C parser when pandas is
    installed (the fastest of the three here: 1e6 x 16, bench/csv_load.py), else
    pyarrow's (a single-character delimiter, no comment lines), else numpy.loadtxt.
    wanted: the 0-based columns to read, in that order (None: all); the others are never
    converted."""
    try:
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None:
        return _parse_pandas(pd, path, delimiter, has_header, names, wanted), "pandas.read_csv"
    if delimiter is not None and not commented:
        try:
            from pyarrow import csv as pacsv
        except ImportError:
            pacsv = None
        if pacsv is not None:
            X = _parse_pyarrow(pacsv, path, delimiter, has_header, names, wanted)
            return X, "pyarrow.csv"
    try:
        X = np.loadtxt(path, delimiter=delimiter, skiprows=int(has_header), comments="#",
                       ndmin=2, dtype=np.float64, usecols=wanted)  # fmt: skip
    except ValueError as exc:
        raise DataError(f"{path}: {_loadtxt_cell(exc, names)}") from None
    return X, "numpy.loadtxt"


def _loadtxt_cell(exc, names):
    """numpy.loadtxt's "could not convert string 'x' to float64 at row 1, column 2." (a
    0-based data row, a 1-based column) in the words of the other readers."""
    found = re.search(r"string '(.*)' to float\d* at row (\d+), column (\d+)", str(exc))
    if found is None:
        return _not_numeric(exc)
    value, row, j = found.group(1), int(found.group(2)), int(found.group(3)) - 1
    if value.strip() == "":
        return f"data contains an empty cell (row {row + 1}, column {names[j]})"
    return _not_a_number(names[j], j, row, value)


def _parse_pandas(pd, path, delimiter, has_header, names, wanted):
    # Columns labelled by position (the header row, if any, is skipped): a header one
    # cell short does not turn the first column into a silent index.
    read = dict(
        sep=delimiter if delimiter is not None else r"\s+",
        header=0 if has_header else None,
        names=list(range(len(names))),
        index_col=False,
        usecols=None if wanted is None else sorted(set(wanted)),
        comment="#",
        skip_blank_lines=True,
        engine="c",
    )
    try:
        df = pd.read_csv(path, dtype=np.float64, **read)
    except ValueError as exc:
        raise DataError(f"{path}: {_name_the_column(pd, path, read, names, exc)}") from None
    if wanted is not None:
        df = df[list(wanted)]
    # One (d, n) block: to_numpy is its transposed view, copied once into rows.
    return np.ascontiguousarray(df.to_numpy(dtype=np.float64))


def _name_the_column(pd, path, read, names, exc):
    """pandas says which value failed, not where: read the text again (this error path
    only) and name the first column holding a cell that is not a number, and its row."""
    try:
        text = pd.read_csv(path, dtype=str, keep_default_na=False, **read)
    except ValueError:
        return _not_numeric(exc)
    for j in text.columns:
        bad = [i for i, v in enumerate(text[j]) if v.strip() and not _NUMBER.match(v.strip())]
        if bad:
            return _not_a_number(names[j], j, bad[0], text[j].iloc[bad[0]])
    return _not_numeric(exc)


def _not_a_number(name, j, row, value):
    return f"column {name!r} (number {j + 1}) is not numeric (row {row + 1}: {value!r})"


def _not_numeric(exc):
    text = _one_line(exc)
    if "could not convert" in text or "Unable to parse" in text:
        return f"a column is not numeric ({text})"
    return text


def _parse_pyarrow(pacsv, path, delimiter, has_header, names, wanted):
    import pyarrow as pa

    labels = [f"c{j}" for j in range(len(names))]
    keep = range(len(names)) if wanted is None else wanted
    read = pacsv.ReadOptions(column_names=labels, skip_rows=int(has_header))
    parse = pacsv.ParseOptions(delimiter=delimiter)
    convert = pacsv.ConvertOptions(include_columns=sorted({labels[j] for j in keep}))
    try:
        table = pacsv.read_csv(path, read_options=read, parse_options=parse,
                               convert_options=convert)  # fmt: skip
    except pa.ArrowInvalid as exc:
        raise DataError(f"{path}: {_one_line(exc)}") from None
    return _columns_to_array(table.select([labels[j] for j in keep]), path, list(keep), names)


def _columns_to_array(table, path, positions, names):
    """(n, d) float64 from a pyarrow Table, one column at a time; a column that is not
    numeric is named (its header name and number in the file) with its first bad cell."""
    import pyarrow as pa

    n, d = table.num_rows, table.num_columns
    X = np.empty((n, d), dtype=np.float64)
    for j in range(d):
        col = table.column(j)
        if pa.types.is_decimal(col.type):
            col = col.cast(pa.float64())
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
                or pa.types.is_boolean(col.type) or pa.types.is_null(col.type)):  # fmt: skip
            values = col.to_pylist()
            row = next((i for i, v in enumerate(values) if not _is_number(v)), None)
            name = names[positions[j]]
            if row is None:  # text that reads as numbers: say so, not "row None"
                raise DataError(
                    f"{path}: column {name!r} (number {positions[j] + 1}) holds numbers "
                    f"stored as text ({col.type}); store them as numbers"
                )
            raise DataError(f"{path}: {_not_a_number(name, positions[j], row, values[row])}")
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
    """Drop a first column that is an index (the module's docstring); warn about a
    headerless one that may be."""
    X = table.X
    n = X.shape[0]
    if X.shape[1] < 2 or n < 2:
        return table
    first = X[:, 0]
    if not (np.array_equal(first, np.round(first)) and np.unique(first).size == n):
        return table
    name = table.names[0]
    index_name = has_header and name.strip().lower() in _INDEX_NAMES
    label = f"{name!r}" if has_header else "1"
    if index_name or (not has_header and np.array_equal(np.sort(first), np.arange(n))):
        why = f"distinct integers under {label}" if has_header else "0..n-1 in some order"
        table.notes.append(
            f"{path}: column {label} is an index or an id ({why}, as pandas' to_csv writes "
            "an index) and is dropped (--columns keeps what it names)"
        )
        table.X = np.ascontiguousarray(X[:, 1:])
        table.names = table.names[1:]
    elif not has_header and (np.diff(first) > 0).all():
        table.warnings.append(
            f"{path}: column 1 holds increasing distinct integers, like an index; it is "
            "clustered as a feature (--columns 2,3,... leaves it out)"
        )
    return table


def _resolve(columns, names, path):
    """The 0-based positions of `columns` (names, or 1-based numbers), in their order."""
    index = []
    for c in columns:
        if c in names:
            index.append(names.index(c))
        elif c.isdigit() and 1 <= int(c) <= len(names):
            index.append(int(c) - 1)
        else:
            raise DataError(
                f"{path}: no column {c!r} (columns: {', '.join(names[:20])}"
                f"{', ...' if len(names) > 20 else ''}; or numbers 1..{len(names)})"
            )
    return index


# ----------------------------------------------------------------------------- binary


def _read_parquet(path, columns):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError(f"{path}: reading .parquet needs pyarrow (pip install pyarrow)") from None
    schema = pq.read_schema(path)
    names = list(schema.names)
    if columns is not None:
        wanted = _resolve(columns, names, path)
        table = pq.read_table(path, columns=sorted({names[j] for j in wanted}))
        X = _columns_to_array(table.select([names[j] for j in wanted]), path, wanted, names)
        return Table(X, [names[j] for j in wanted], "pyarrow.parquet")
    # pandas stores an index that is not a plain range as columns its metadata names.
    index = [c for c in (schema.pandas_metadata or {}).get("index_columns", [])
             if isinstance(c, str) and c in names]  # fmt: skip
    keep = [j for j, c in enumerate(names) if c not in index]
    if not keep:
        raise DataError(f"{path}: no columns")
    table = pq.read_table(path, columns=[names[j] for j in keep])
    notes = [f"{path}: pandas' index column {c!r} is dropped (--columns keeps it)" for c in index]
    X = _columns_to_array(table, path, keep, names)
    table = Table(X, [names[j] for j in keep], "pyarrow.parquet", notes)
    return _drop_index(table, path, True)


def _read_numpy(path, ext, columns):
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
    names = [f"x{j}" for j in range(data.shape[1])]
    if columns is not None:
        wanted = _resolve(columns, names, path)
        data, names = data[:, wanted], [names[j] for j in wanted]
    return Table(np.ascontiguousarray(data, dtype=np.float64), names, "numpy.load")
