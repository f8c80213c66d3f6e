"""Independent reader for the Iceberg end-to-end tests: reads an Iceberg
table through PyPI `pyiceberg`'s SqlCatalog on the same SQLite file (not
idem's Rust code) and prints its current snapshot's sequence number, the
snapshot summaries' idem fields and every row as canonical JSON, rows
sorted, so two tables can be compared row by row.

usage: read_iceberg.py CATALOG_DB WAREHOUSE NAMESPACE.TABLE [CATALOG_NAME]
(CATALOG_DB a SQLite file, or a SQLAlchemy URI: postgresql+psycopg2://...)
(WAREHOUSE a local folder, or s3://... with the AWS_* variables set)
IDEM_READ_REF=NAME reads the branch or tag NAME instead of main.
"""
import datetime
import decimal
import json
import os
import sys

from pyiceberg.catalog.sql import SqlCatalog


def plain(v):
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    return v


def main() -> None:
    db, warehouse, ident = sys.argv[1], sys.argv[2], sys.argv[3]
    name = sys.argv[4] if len(sys.argv) > 4 else "idem"
    props = {}
    if warehouse.startswith("s3://"):
        # The tests' S3 server, from the standard AWS variables.
        props = {
            "s3.endpoint": os.environ["AWS_ENDPOINT_URL"],
            "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
            "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
        }
    else:
        warehouse = f"file://{warehouse}"
    catalog = SqlCatalog(name, uri=db if "://" in db else f"sqlite:///{db}", warehouse=warehouse, **props)
    table = catalog.load_table(ident)
    snap = table.current_snapshot()
    # IDEM_READ_REF: read a branch (or tag) instead of main.
    ref = os.environ.get("IDEM_READ_REF")
    if ref:
        snap = table.snapshot_by_name(ref)
        if snap is None:
            sys.exit(f"the table has no ref {ref!r}")
        arrow = table.scan(snapshot_id=snap.snapshot_id).to_arrow()
    else:
        arrow = table.scan().to_arrow()
    cols = sorted(arrow.column_names)
    data = arrow.to_pydict()
    rows = [
        json.dumps({c: plain(data[c][i]) for c in cols}, sort_keys=True)
        for i in range(arrow.num_rows)
    ]
    rows.sort()
    summaries = []
    # In commit order (metadata lists snapshots in no particular order).
    for s in sorted(table.snapshots(), key=lambda s: s.sequence_number):
        props = s.summary.additional_properties if s.summary else {}
        summaries.append(
            {
                "sequence": s.sequence_number,
                "id": s.snapshot_id,
                "parent": s.parent_snapshot_id,
                "operation": s.summary.operation.value if s.summary else None,
                **{k: v for k, v in props.items() if k.startswith("idem.")},
            }
        )
    # How many data files a scan with the row filter in IDEM_PLAN_FILTER
    # plans (files are skipped by their column bounds).
    planned = None
    if os.environ.get("IDEM_PLAN_FILTER"):
        planned = len(list(table.scan(row_filter=os.environ["IDEM_PLAN_FILTER"]).plan_files()))
    print(
        json.dumps(
            {
                "planned": planned,
                "version": snap.sequence_number if snap else -1,
                "columns": cols,
                "rows": rows,
                "snapshots": summaries,
                "schema": [
                    [f.name, str(f.field_type), f.required] for f in table.schema().fields
                ],
                "partition": [str(f) for f in table.spec().fields],
                "snapshot": snap.snapshot_id if snap else None,
                "refs": {name: r.snapshot_id for name, r in table.refs().items()},
            }
        )
    )


if __name__ == "__main__":
    main()
