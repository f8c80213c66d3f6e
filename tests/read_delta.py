"""Independent reader for the end-to-end tests: reads a Delta table with the
PyPI `deltalake` + `polars` packages (not idem's Rust code) and prints its
version and every row as canonical JSON, rows sorted, so two tables can be
compared row by row.

usage: read_delta.py TABLE [VERSION]
"""
import json
import os
import sys

import polars as pl
from deltalake import DeltaTable


def storage_options(path):
    """S3 settings from the standard AWS variables (the tests' server)."""
    if not path.startswith("s3://"):
        return None
    keys = ["AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]
    opts = {k: os.environ[k] for k in keys if k in os.environ}
    opts["AWS_ALLOW_HTTP"] = os.environ.get("AWS_ALLOW_HTTP", "false")
    return opts


def main() -> None:
    path = sys.argv[1]
    version = int(sys.argv[2]) if len(sys.argv) > 2 else None
    opts = storage_options(path)
    dt = DeltaTable(path, version=version, storage_options=opts)
    df = pl.read_delta(path, version=dt.version(), storage_options=opts)
    cols = sorted(df.columns)
    rows = [json.dumps(dict(zip(cols, r)), sort_keys=True) for r in df.select(cols).rows()]
    rows.sort()
    print(json.dumps({"version": dt.version(), "columns": cols, "rows": rows}))


if __name__ == "__main__":
    main()
