"""Reads a Delta table with the Python `deltalake` package (an outside reader) and prints
one JSON document: row count, column types, and rows sorted by the given key column (binary
values as hex); with a third argument `--summary`, the key column's sum and distinct count
instead of rows."""
import json
import os
import sys


def printable(value):
    """Bytes as hex (a binary column's value), anything else JSON lacks as its str()."""
    return value.hex() if isinstance(value, bytes) else str(value)


def main():
    from deltalake import DeltaTable

    path, key = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
    summary = len(sys.argv) > 3 and sys.argv[3] == "--summary"
    dt = DeltaTable(path)
    table = dt.to_pyarrow_table()
    out = {
        "version": dt.version(),
        "num_rows": table.num_rows,
        "types": {f.name: str(f.type) for f in table.schema},
        "configuration": dict(dt.metadata().configuration),
    }
    if summary:
        import pyarrow.compute as pc

        out["key_sum"] = pc.sum(table[key]).as_py()
        out["key_distinct"] = pc.count_distinct(table[key]).as_py()
    else:
        rows = table.to_pylist()
        if key:
            rows.sort(key=lambda r: (r.get(key) is None, str(r.get(key))))
        out["rows"] = rows
    sys.stdout.write(json.dumps(out, default=printable))
    sys.stdout.flush()


if __name__ == "__main__":
    try:
        main()
        code = 0
    except Exception as e:  # report and fail; never hang on the delta-rs#2184 exit abort
        sys.stderr.write(f"read_delta.py: {e!r}\n")
        sys.stderr.flush()
        code = 1
    os._exit(code)
