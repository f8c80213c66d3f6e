"""Writes the generated cases of tests/parquet_corpus.rs with pyarrow (the
reader the files are compared with): `python parquet_corpus.py CASE OUT [N]`.

- bomb: 3 rows of N-byte strings, zstd, no dictionary: a few KB on disk,
  3N bytes once inflated (issue 28, finding 7).
- wide: N-byte strings, 3 rows, in 8 columns, zstd: each column's page
  within a budget of 4N, all eight together over it.
- empty: a file of columns `id` (int64) and `name` (string) and no rows.
- nested_int96: a struct column holding an INT96 timestamp in year N
  (Spark's default encoding of nested timestamps).
- rows: prints the rows pyarrow reads from OUT and its footer's row count.
"""

import sys

import pyarrow as pa
import pyarrow.parquet as pq


def main() -> None:
    case, out = sys.argv[1], sys.argv[2]
    if case == "bomb":
        n = int(sys.argv[3])
        table = pa.table({"s": pa.array(["x" * n] * 3, pa.string())})
        pq.write_table(table, out, compression="zstd", use_dictionary=False)
    elif case == "wide":
        n = int(sys.argv[3])
        table = pa.table({f"c{i}": pa.array([str(i) * n] * 3, pa.string()) for i in range(8)})
        pq.write_table(table, out, compression="zstd", use_dictionary=False)
    elif case == "empty":
        table = pa.table(
            {"id": pa.array([], pa.int64()), "name": pa.array([], pa.string())}
        )
        pq.write_table(table, out)
    elif case == "nested_int96":
        import datetime

        ts = pa.array([datetime.datetime(int(sys.argv[3]), 1, 1)], pa.timestamp("us"))
        table = pa.table({"s": pa.StructArray.from_arrays([ts], ["ts"])})
        pq.write_table(table, out, use_deprecated_int96_timestamps=True)
    elif case == "rows":
        f = pq.ParquetFile(out)
        groups = sum(f.metadata.row_group(i).num_rows for i in range(f.num_row_groups))
        print(pq.read_table(out).num_rows, groups)
    else:
        raise SystemExit(f"unknown case {case}")


if __name__ == "__main__":
    main()
