"""Another writer of an Iceberg table, for the end-to-end tests: PyPI
pyiceberg through its own SqlCatalog on the same SQLite file.

usage: write_iceberg.py CATALOG_DB WAREHOUSE NAMESPACE.TABLE delete FILTER
       (deletes the rows FILTER selects, e.g. "date = '2026-10-01' AND
       amount > 50": a copy-on-write overwrite)
"""
import sys

from pyiceberg.catalog.sql import SqlCatalog


def main() -> None:
    db, warehouse, ident, op = sys.argv[1:5]
    catalog = SqlCatalog("idem", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    table = catalog.load_table(ident)
    if op == "delete":
        table.delete(delete_filter=sys.argv[5])
    else:
        raise SystemExit(f"unknown operation {op}")


if __name__ == "__main__":
    main()
