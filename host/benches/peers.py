"""The jobs of benchmark figure 9 as a user would run them without idem:
DuckDB for Parquet -> Parquet, polars + deltalake for Parquet -> Delta.
Each is the same computation as the idem example named (same filter, same
derived column, same grouping), over the same files.

    peers.py JOB OUT FILE...

JOB: clean_orders_duckdb | clean_orders_polars_delta | daily_revenue_duckdb.
Prints {"rows": N} (rows written) on stdout. The harness times the whole
process and reads its peak RSS.
"""

import json
import sys

MIN_AMOUNT = 100  # the harness's params for clean_orders
DAY = "2026-10-01"


def files_sql(files):
    return "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"


def clean_orders_duckdb(out, files):
    import duckdb

    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT *, amount * quantity AS total FROM read_parquet({files_sql(files)}) "
        f"WHERE amount >= {MIN_AMOUNT}) TO '{out}' (FORMAT parquet)"
    )
    return con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0]


def daily_revenue_duckdb(out, files):
    import duckdb

    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT '{DAY}' AS day, customer, count(*) AS orders, "
        f"sum(amount * quantity) AS revenue FROM read_parquet({files_sql(files)}) "
        "WHERE customer IS NOT NULL AND amount IS NOT NULL AND quantity IS NOT NULL "
        f"GROUP BY customer ORDER BY customer) TO '{out}' (FORMAT parquet)"
    )
    return con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0]


def clean_orders_polars_delta(out, files):
    import polars as pl

    df = (
        pl.scan_parquet(files)
        .filter(pl.col("amount") >= MIN_AMOUNT)
        .with_columns(
            total=pl.col("amount") * pl.col("quantity"),
            date=pl.lit(DAY),
        )
        .collect()
    )
    df.write_delta(
        out,
        mode="overwrite",
        delta_write_options={
            "predicate": f"date = '{DAY}'",
            "partition_by": ["date"],
        },
    )
    return df.height


if __name__ == "__main__":
    job, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    rows = globals()[job](out, files)
    print(json.dumps({"rows": int(rows)}))
