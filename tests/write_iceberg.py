"""Another writer of an Iceberg table, for the end-to-end tests: PyPI
pyiceberg through its own SqlCatalog on the same SQLite file.

usage: write_iceberg.py CATALOG_DB WAREHOUSE NAMESPACE.TABLE delete FILTER
       (deletes the rows FILTER selects, e.g. "date = '2026-10-01' AND
       amount > 50": a copy-on-write overwrite)
       write_iceberg.py ... append-copy COLUMN VALUE
       (appends one of the table's rows with COLUMN set to VALUE)
       write_iceberg.py ... rename OLD NEW
       (renames a column: a schema change, no data file touched)
       write_iceberg.py ... create-repartitioned
       (creates the table with clean_orders' columns unpartitioned, appends
       one row, then partitions it by `date`: a file of an earlier spec)
       write_iceberg.py ... create-date-partitioned
       (creates the table with clean_orders' columns and `date` a DATE,
       partitioned by it: as Spark's CREATE TABLE ... PARTITIONED BY (date))
"""
import sys

from pyiceberg.catalog.sql import SqlCatalog


def main() -> None:
    db, warehouse, ident, op = sys.argv[1:5]
    catalog = SqlCatalog("idem", uri=db if "://" in db else f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    if op == "create-date-partitioned":
        create_date_partitioned(catalog, ident)
        return
    if op == "create-repartitioned":
        create_repartitioned(catalog, ident)
        return
    table = catalog.load_table(ident)
    if op == "delete":
        table.delete(delete_filter=sys.argv[5])
    elif op == "append-copy":
        import pyarrow as pa

        column, value = sys.argv[5:7]
        rows = table.scan(limit=1).to_arrow()
        i = rows.schema.get_field_index(column)
        field = rows.schema.field(i)
        rows = rows.set_column(i, field, pa.array([value], field.type))
        table.append(rows)
    elif op == "rename":
        with table.update_schema() as update:
            update.rename_column(sys.argv[5], sys.argv[6])
    else:
        raise SystemExit(f"unknown operation {op}")


def create_repartitioned(catalog, ident: str) -> None:
    import pyarrow as pa

    catalog.create_namespace_if_not_exists(ident.split(".")[0])
    row = pa.table({
        "event_id": ["e-0"], "order_id": [0], "customer": ["c-0"], "amount": [1.0],
        "quantity": [1], "status": ["paid"], "total": [1.0], "date": ["2026-10-01"],
    })
    table = catalog.create_table(ident, schema=row.schema)
    table.append(row)
    with table.update_spec() as update:
        update.add_identity("date")


def create_date_partitioned(catalog, ident: str) -> None:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DateType, DoubleType, LongType, NestedField, StringType

    columns = [
        ("event_id", StringType()), ("order_id", LongType()), ("customer", StringType()),
        ("amount", DoubleType()), ("quantity", LongType()), ("status", StringType()),
        ("total", DoubleType()), ("date", DateType()),
    ]
    schema = Schema(*[NestedField(i + 1, n, t, required=False) for i, (n, t) in enumerate(columns)])
    spec = PartitionSpec(PartitionField(source_id=8, field_id=1000, transform=IdentityTransform(), name="date"))
    catalog.create_namespace_if_not_exists(ident.split(".")[0])
    catalog.create_table(ident, schema=schema, partition_spec=spec)


if __name__ == "__main__":
    main()
