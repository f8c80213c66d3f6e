"""Columns and kernels: filter / take / slice / concat / compare / derive,
checked against pyarrow (filter/take/slice) on every supported type (both filter paths:
few long runs, and many short ones). Bitmap helpers need no pyarrow."""

import operator
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import idem_guest as ig  # noqa: E402
from idem_guest import compute, ipc  # noqa: E402
from idem_guest.column import Selection  # noqa: E402

try:
    import pyarrow as pa
except ImportError:  # pragma: no cover
    pa = None

try:  # as package `tests` (discover -t guest-sdk/python) or as top-level modules
    from .test_ipc import cases, pa_stream, raw
except ImportError:
    from test_ipc import cases, pa_stream, raw  # noqa: E402

NEED_PA = unittest.skipIf(pa is None, "pyarrow is not installed: kernel checks skipped")


class Bitmaps(unittest.TestCase):
    def test_bits_round_trip(self):
        rng = random.Random(1)
        for n in list(range(0, 70)) + [1000, 8191, 8192, 8193]:
            b01 = bytes(rng.randint(0, 1) for _ in range(n))
            bits = ig.bytes_to_bits(b01)
            self.assertEqual(len(bits), (n + 7) // 8)
            self.assertEqual(ig.bits_to_bytes(bits, n), b01)
            expect = bytes(sum(b01[i * 8 + j] << j for j in range(8) if i * 8 + j < n)
                           for i in range((n + 7) // 8))
            self.assertEqual(bits, expect)
            for off in (1, 3, 9):
                if n > off:
                    self.assertEqual(ig.bits_to_bytes(bits, n - off, off), b01[off:])

    def test_masks(self):
        a, b = bytes([1, 1, 0, 0]), bytes([1, 0, 1, 0])
        self.assertEqual(ig.mask_and(a, b), bytes([1, 0, 0, 0]))
        self.assertEqual(ig.mask_or(a, b), bytes([1, 1, 1, 0]))
        self.assertEqual(ig.mask_not(a), bytes([0, 0, 1, 1]))
        self.assertEqual(ig.as_mask([True, 0, "x", None], 4), bytes([1, 0, 1, 0]))
        self.assertEqual(ig.as_mask(bytes([0, 5, 1, 0]), 4), bytes([0, 1, 1, 0]))
        bc = ig.column([True, None, False, True], ig.boolean)
        self.assertEqual(ig.as_mask(bc, 4), bytes([1, 0, 0, 1]))
        with self.assertRaisesRegex(ig.IdemError, "3 entries for 4 rows"):
            ig.as_mask(b"\x01\x01\x01", 4)

    def test_selection_paths(self):
        few = Selection(bytes([1] * 50 + [0] + [1] * 49))
        self.assertIsNotNone(few.starts)
        self.assertEqual((few.starts, few.ends, few.kept), ([0, 51], [50, 100], 99))
        many = Selection(bytes([1, 0] * 50))
        self.assertIsNone(many.starts)


def masks(n, rng):
    yield "all", bytes([1]) * n
    yield "none", bytes(n)
    yield "few_runs", bytes(0 if i in (3, 17) else 1 for i in range(n))
    yield "random", bytes(rng.randint(0, 1) for _ in range(n))
    yield "alternating", bytes(i % 2 for i in range(n))


@NEED_PA
class Kernels(unittest.TestCase):
    def setUp(self):
        self.rng = random.Random(7)

    def columns(self):
        for name, ty, pty, values in cases():
            vals = (values * 5)[:41]
            arr = pa.array(vals, type=pty)
            batch = ipc.read_batch(pa_stream([pa.record_batch([arr], names=["v"])]))
            # both an input (memoryview) column and a built (array) column
            yield name, batch.column("v"), ig.column(vals, ty), arr

    def test_filter(self):
        for name, col, built, arr in self.columns():
            for mname, m in masks(len(arr), self.rng):
                with self.subTest(name=name, mask=mname):
                    want = raw(arr.filter(pa.array(list(map(bool, m)))))
                    self.assertEqual(col.filter(m).to_pylist(), want)
                    self.assertEqual(built.filter(m).to_pylist(), want)
                    sliced = col.slice(3, 30)
                    want = raw(arr.slice(3, 30).filter(pa.array(list(map(bool, m[:30])))))
                    self.assertEqual(sliced.filter(m[:30]).to_pylist(), want)
                    out = col.filter(m)
                    self.assertEqual(out.null_count, sum(v is None for v in out.to_pylist()))

    def test_filtered_columns_encode(self):
        for name, col, built, arr in self.columns():
            for mname, m in masks(len(arr), self.rng):
                with self.subTest(name=name, mask=mname):
                    b = ig.Batch([ig.Field("v", col.type)], [col.slice(5, 30).filter(m[:30])])
                    t = pa.ipc.open_stream(ipc.write_stream(b)).read_all()
                    t.validate(full=True)
                    want = raw(arr.slice(5, 30).filter(pa.array(list(map(bool, m[:30])))))
                    self.assertEqual(raw(t.column(0).combine_chunks()) if t.num_rows else [], want)

    def test_take_and_slice(self):
        for name, col, built, arr in self.columns():
            idx = [self.rng.randrange(len(arr)) for _ in range(60)] + [0, len(arr) - 1]
            with self.subTest(name):
                want = raw(arr.take(pa.array(idx)))
                self.assertEqual(col.take(idx).to_pylist(), want)
                self.assertEqual(built.take(idx).to_pylist(), want)
                self.assertEqual(col.slice(7, 20).to_pylist(), raw(arr.slice(7, 20)))
                self.assertEqual(col[7:27].to_pylist(), raw(arr.slice(7, 20)))
                self.assertEqual([col[i] for i in range(len(arr))], raw(arr))
                self.assertEqual(col[-1], raw(arr)[-1])
                with self.assertRaises(ig.IdemError):
                    col.take([len(arr)])

    def test_concat(self):
        for name, col, built, arr in self.columns():
            with self.subTest(name):
                parts = [col.slice(0, 10), built.slice(10, 13), col.slice(23, 18)]
                self.assertEqual(ig.concat_columns(parts).to_pylist(), raw(arr))

    def test_batch_ops(self):
        t = pa.table({"a": pa.array([5.0, None, 20.0, 10.0, 9.99]),
                      "q": pa.array([1, 3, 1, 2, 4], pa.int64()),
                      "s": pa.array(["x", "y", None, "w", "v"])})
        b = ipc.read_batch(pa_stream(t.to_batches()))
        self.assertEqual(b.num_rows, 5)
        self.assertEqual(b.column_names, ["a", "q", "s"])
        kept = b.filter(compute.ge(b["a"], 10))
        self.assertEqual(kept.to_pydict(), {"a": [20.0, 10.0], "q": [1, 2], "s": [None, "w"]})
        self.assertEqual(b.select(["s", "a"]).column_names, ["s", "a"])
        self.assertEqual(b.drop(["a"]).column_names, ["q", "s"])
        w = b.with_column(ig.Field("t", ig.float64, True),
                          compute.derive(ig.float64, operator.mul, b["a"], b["q"]))
        self.assertEqual(w["t"].to_pylist(), [5.0, None, 20.0, 20.0, 9.99 * 4])
        self.assertEqual(w.with_column("q", ig.column([0] * 5, ig.int64))["q"].to_pylist(), [0] * 5)
        self.assertEqual(b.sort_by("s")["s"].to_pylist(), ["v", "w", "x", "y", None])
        self.assertEqual(b.take([4, 0])["q"].to_pylist(), [4, 1])
        self.assertEqual(ig.Batch.concat([b, b]).num_rows, 10)
        self.assertEqual(b.to_pylist()[0], {"a": 5.0, "q": 1, "s": "x"})
        with self.assertRaisesRegex(ig.IdemError, "no column `nope`"):
            b.column("nope")
        e = ig.Batch.empty(b.schema)
        self.assertEqual((e.num_rows, e.schema), (0, b.schema))

    def test_compare(self):
        # Python's comparison semantics are Arrow's here (NaN compares false,
        # -0.0 == 0.0, str order is code point order); null rows give 0.
        ops = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
               "gt": operator.gt, "ge": operator.ge}
        data = [
            (pa.array([1.5, None, float("nan"), -0.0, 10.0, 9.999, 1e300]), [10, 10.0, 0.0, -1]),
            (pa.array([1, None, -5, 2 ** 62, 10, 0], pa.int64()), [10, 0, 9.5, -5, 2 ** 62]),
            (pa.array([1, None, 255, 10], pa.uint8()), [10, 255, 10.0]),
            (pa.array(["b", None, "a", "é", "", "ab"]), ["a", "", "é"]),
            (pa.array([True, None, False]), [True, False]),
        ]
        for arr, scalars in data:
            col = ipc.read_batch(pa_stream([pa.record_batch([arr], names=["v"])])).column("v")
            for sc in scalars:
                for op, fn in ops.items():
                    with self.subTest(type=str(arr.type), scalar=sc, op=op):
                        want = bytes(v is not None and fn(v, sc) for v in arr.to_pylist())
                        self.assertEqual(compute.compare(col, op, sc), want)
        with self.assertRaisesRegex(ig.IdemError, "is_null"):
            compute.eq(col, None)

    def test_isin_nulls_derive(self):
        col = ig.column(["a", None, "b", "c"], ig.utf8)
        self.assertEqual(compute.isin(col, {"a", "c"}), bytes([1, 0, 0, 1]))
        self.assertEqual(compute.is_null(col), bytes([0, 1, 0, 0]))
        self.assertEqual(compute.is_valid(col), bytes([1, 0, 1, 1]))
        self.assertEqual(compute.fill_null(col, "z").to_pylist(), ["a", "z", "b", "c"])
        n = ig.column([1, None, 3], ig.int64)
        d = compute.derive(ig.int64, lambda x: 10 // x, n)  # never called on the null slot
        self.assertEqual(d.to_pylist(), [10, None, 3])
        s = compute.derive(ig.utf8, lambda a, b: "%s%d" % (a, b), ig.column(["x", "y", None], ig.utf8), n)
        self.assertEqual(s.to_pylist(), ["x1", None, None])
        with self.assertRaisesRegex(ig.IdemError, "do not fit"):
            compute.derive(ig.int8, lambda x: x * 1000, ig.column([1, 2], ig.int64))


class Building(unittest.TestCase):
    def test_column_from_python(self):
        self.assertEqual(ig.column([1, None, 3], ig.int64).to_pylist(), [1, None, 3])
        self.assertEqual(ig.column(ig.float64, [0.5, None]).to_pylist(), [0.5, None])
        self.assertEqual(ig.column(["a", None], ig.utf8).null_count, 1)
        self.assertEqual(ig.column([], ig.float64).to_pylist(), [])
        self.assertEqual(ig.column([None, None], ig.null).to_pylist(), [None, None])
        with self.assertRaisesRegex(ig.IdemError, "takes str"):
            ig.column(["a", 3], ig.utf8)
        with self.assertRaisesRegex(ig.IdemError, "Int8"):
            ig.column([1000], ig.int8)
        with self.assertRaises(TypeError):
            ig.column([1], "int64")

    def test_schema_and_field(self):
        s = ig.Schema([ig.Field("a", ig.int64, False), ig.Field("b", ig.timestamp("ms", "UTC"))])
        self.assertEqual(s.names, ["a", "b"])
        self.assertEqual(s.index("b"), 1)
        self.assertIn("a", s)
        self.assertEqual(str(s.field("b").type), 'Timestamp(Millisecond, Some("UTC"))')
        self.assertEqual(s.require("a", ig.int64).name, "a")
        with self.assertRaisesRegex(ig.IdemError, "column `a` must be Float64, the input has Int64"):
            s.require("a", ig.float64)
        with self.assertRaisesRegex(ig.IdemError, "input has no `c` column"):
            s.require("c")
        with self.assertRaises(TypeError):
            ig.Field("x", "int64")


if __name__ == "__main__":
    unittest.main()
