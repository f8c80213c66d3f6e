"""Independent reader for the end-to-end tests: reads a Delta table with the
PyPI `deltalake` + `polars` packages (not idem's Rust code) and prints its
version and every row as canonical JSON, rows sorted, so two tables can be
compared row by row.

usage: read_delta.py TABLE [VERSION]
"""
import json
import sys

import polars as pl
from deltalake import DeltaTable


def main() -> None:
    path = sys.argv[1]
    version = int(sys.argv[2]) if len(sys.argv) > 2 else None
    dt = DeltaTable(path, version=version)
    df = pl.read_delta(path, version=dt.version())
    cols = sorted(df.columns)
    rows = [json.dumps(dict(zip(cols, r)), sort_keys=True) for r in df.select(cols).rows()]
    rows.sort()
    print(json.dumps({"version": dt.version(), "columns": cols, "rows": rows}))


if __name__ == "__main__":
    main()
