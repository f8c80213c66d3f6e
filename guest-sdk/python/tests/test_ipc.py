"""Arrow IPC round trips against pyarrow: pyarrow writes -> idem_guest reads,
idem_guest writes -> pyarrow reads, for every supported type, with nulls,
empty batches, sliced (offset) data and multi-batch streams.

Run: python -m unittest discover -s guest-sdk/python/tests
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import idem_guest as ig  # noqa: E402
from idem_guest import ipc  # noqa: E402

try:
    import pyarrow as pa
except ImportError:  # pragma: no cover
    pa = None

NEED_PA = unittest.skipIf(pa is None, "pyarrow is not installed: IPC round trips skipped")


def cases():
    """(name, idem type, pyarrow type, values): temporal values are raw ints."""
    if pa is None:
        return []
    i = lambda bits: [0, 1, -1, 2 ** (bits - 1) - 1, -(2 ** (bits - 1)), None, 7, None, 3]
    u = lambda bits: [0, 1, 2 ** bits - 1, None, 5, 6, 7, 8, None]
    out = [
        ("null", ig.null, pa.null(), [None] * 9),
        ("bool", ig.boolean, pa.bool_(), [True, None, False, True, False, False, True, True, None]),
        ("int8", ig.int8, pa.int8(), i(8)),
        ("int16", ig.int16, pa.int16(), i(16)),
        ("int32", ig.int32, pa.int32(), i(32)),
        ("int64", ig.int64, pa.int64(), i(64)),
        ("uint8", ig.uint8, pa.uint8(), u(8)),
        ("uint16", ig.uint16, pa.uint16(), u(16)),
        ("uint32", ig.uint32, pa.uint32(), u(32)),
        ("uint64", ig.uint64, pa.uint64(), u(64)),
        ("float32", ig.float32, pa.float32(), [0.5, None, -2.25, float("inf"), 2.0 ** 100, 0.0, None, 3.0, -0.0]),
        ("float64", ig.float64, pa.float64(), [0.1, None, -2.5e-300, float("-inf"), 1e308, 0.0, None, 3.0, -0.0]),
        ("utf8", ig.utf8, pa.string(), ["a", None, "", "héllo wörld", "日本語", "x" * 100, None, "🦀", "z"]),
        ("large_utf8", ig.large_utf8, pa.large_string(), ["a", None, "", "é", "b" * 50, None, "c", "d", "e"]),
        ("binary", ig.binary, pa.binary(), [b"\x00\xff", None, b"", b"abc", bytes(range(256)), None, b"z", b"", b"q"]),
        ("large_binary", ig.large_binary, pa.large_binary(), [b"\x00", None, b"", b"abc", b"x", None, b"y", b"", b"q"]),
        ("date32", ig.date32, pa.date32(), [0, 1, -1, 20727, None, 2 ** 31 - 1, -(2 ** 31), None, 5]),
        ("date64", ig.date64, pa.date64(), [0, 86400000, -86400000, None, 1790812800000, None, 0, 0, 0]),
    ]
    for unit in ("s", "ms", "us", "ns"):
        for tz in (None, "UTC", "Europe/Paris"):
            out.append(("timestamp_%s_%s" % (unit, tz), ig.timestamp(unit, tz), pa.timestamp(unit, tz),
                        [0, 1, -1, None, 1790812800, 2 ** 62, None, 3, 4]))
        out.append(("duration_" + unit, ig.duration(unit), pa.duration(unit),
                    [0, 1, -1, None, 5, 2 ** 62, None, 3, 4]))
    for unit in ("s", "ms"):
        out.append(("time32_" + unit, ig.time32(unit), pa.time32(unit), [0, 1, 59, None, 3600, 86399, None, 3, 4]))
    for unit in ("us", "ns"):
        out.append(("time64_" + unit, ig.time64(unit), pa.time64(unit), [0, 1, 59, None, 3600, 86399, None, 3, 4]))
    return out


def pa_stream(batches, schema=None, **options):
    sink = pa.BufferOutputStream()
    schema = schema or batches[0].schema
    opts = pa.ipc.IpcWriteOptions(**options) if options else None
    with pa.ipc.new_stream(sink, schema, options=opts) as w:
        for b in batches:
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def pa_read(data):
    return pa.ipc.open_stream(data).read_all()


def raw(arr):
    """Values as idem_guest sees them: temporal types as their integers."""
    t = arr.type
    if pa.types.is_temporal(t):
        width = t.bit_width
        arr = arr.view(pa.int32() if width == 32 else pa.int64())
    return arr.to_pylist()


@NEED_PA
class PyarrowWritesWeRead(unittest.TestCase):
    def test_every_type_with_nulls(self):
        for name, ty, pty, values in cases():
            with self.subTest(name):
                arr = pa.array(values, type=pty)
                nn = pa.array([v for v in values if v is not None] or [], type=pty)
                n = len(nn)
                b = pa.record_batch([arr.slice(0, n), nn],
                                    schema=pa.schema([pa.field("v", pty, True),
                                                      pa.field("w", pty, pty == pa.null())]))
                schema, batches = ipc.read_stream(pa_stream([b]))
                self.assertEqual(schema.names, ["v", "w"])
                self.assertEqual(schema[0].type, ty)
                self.assertTrue(schema[0].nullable)
                self.assertEqual(schema[1].nullable, pty == pa.null())
                self.assertEqual(len(batches), 1)
                got = batches[0]
                self.assertEqual(got.num_rows, n)
                self.assertEqual(got.column("v").to_pylist(), raw(arr.slice(0, n)))
                self.assertEqual(got.column("w").to_pylist(), raw(nn))
                self.assertEqual(got.column("v").null_count, arr.slice(0, n).null_count)

    def test_empty_batch(self):
        for name, ty, pty, values in cases():
            with self.subTest(name):
                b = pa.record_batch([pa.array([], type=pty)], names=["v"])
                schema, batches = ipc.read_stream(pa_stream([b]))
                self.assertEqual(batches[0].num_rows, 0)
                self.assertEqual(batches[0].column("v").to_pylist(), [])
                self.assertEqual(schema[0].type, ty)

    def test_schema_only_stream(self):
        s = pa.schema([pa.field("a", pa.int64(), False), pa.field("b", pa.string())])
        schema, batches = ipc.read_stream(pa_stream([], schema=s))
        self.assertEqual(batches, [])
        self.assertEqual([(f.name, f.type, f.nullable) for f in schema],
                         [("a", ig.int64, False), ("b", ig.utf8, True)])
        self.assertIsNone(ipc.read_batch(pa_stream([], schema=s)))
        self.assertEqual(ipc.read_stream(b""), (None, []))

    def test_sliced_input(self):
        # pyarrow writes slices with offsets into shared buffers; the reader
        # must honour what lands in the stream (including bit offsets).
        for name, ty, pty, values in cases():
            with self.subTest(name):
                arr = pa.array(values * 3, type=pty)
                b = pa.record_batch([arr], names=["v"]).slice(5, 13)
                got = ipc.read_batch(pa_stream([b]))
                self.assertEqual(got.column("v").to_pylist(), raw(b.column(0)))

    def test_multi_batch_stream(self):
        t = pa.table({"a": pa.array(range(100), pa.int64()),
                      "s": pa.array([None if i % 7 == 0 else "s%d" % i for i in range(100)])})
        data = pa_stream(t.to_batches(max_chunksize=30))
        schema, batches = ipc.read_stream(data)
        self.assertEqual([b.num_rows for b in batches], [30, 30, 30, 10])
        whole = ipc.read_batch(data)
        self.assertEqual(whole.num_rows, 100)
        self.assertEqual(whole.column("s").to_pylist(), t.column("s").to_pylist())
        self.assertEqual(whole.column("a").to_pylist(), list(range(100)))

    def test_metadata_v4_and_legacy_framing(self):
        b = pa.record_batch([pa.array([1, None, 3], pa.int32()), pa.array(["x", "y", None])],
                            names=["a", "b"])
        for opts in ({"metadata_version": pa.ipc.MetadataVersion.V4},
                     {"use_legacy_format": True}):
            with self.subTest(str(opts)):
                got = ipc.read_batch(pa_stream([b], **opts))
                self.assertEqual(got.to_pydict(), {"a": [1, None, 3], "b": ["x", "y", None]})

    def test_field_and_schema_metadata(self):
        s = pa.schema([pa.field("a", pa.int64(), metadata={"k": "v", "PARQUET:field_id": "1"})],
                      metadata={"top": "level"})
        b = pa.record_batch([pa.array([1])], schema=s)
        schema = ipc.read_schema(pa_stream([b]))
        self.assertEqual(schema[0].metadata, {"k": "v", "PARQUET:field_id": "1"})
        self.assertEqual(schema.metadata, {"top": "level"})

    def test_compressed_input_is_refused(self):
        b = pa.record_batch([pa.array(range(1000))], names=["a"])
        for codec in ("lz4", "zstd"):
            with self.subTest(codec):
                with self.assertRaisesRegex(ipc.IpcError, "compressed"):
                    ipc.read_batch(pa_stream([b], compression=codec))

    def test_dictionary_input_is_refused(self):
        arr = pa.array(["a", "b", "a"]).dictionary_encode()
        b = pa.record_batch([arr], names=["d"])
        with self.assertRaisesRegex(ipc.IpcError, "ictionary"):
            ipc.read_batch(pa_stream([b]))

    def test_unsupported_type_named_in_error(self):
        b = pa.record_batch([pa.array([1, 2]), pa.array([[1], [2, 3]])], names=["ok", "tags"])
        data = pa_stream([b])
        schema = ipc.read_schema(data)  # the schema itself is fine
        self.assertFalse(schema.field("tags").type.supported)
        self.assertIn("List", str(schema.field("tags").type))
        with self.assertRaisesRegex(ipc.IpcError, "`tags`.*List"):
            ipc.read_batch(data)
        for pty, text in ((pa.decimal128(10, 2), "Decimal128"), (pa.float16(), "Float16"),
                          (pa.struct([("x", pa.int8())]), "Struct")):
            s = pa.schema([pa.field("c", pty)])
            self.assertIn(text, str(ipc.read_schema(pa_stream([], schema=s)).field("c").type))

    def test_truncated_input(self):
        b = pa.record_batch([pa.array(range(10))], names=["a"])
        data = pa_stream([b])
        with self.assertRaises(ipc.IpcError):
            ipc.read_batch(data[:len(data) // 2])


def ig_batch(ty, values, nullable=True, name="v"):
    return ig.Batch([ig.Field(name, ty, nullable)], [ig.column(values, ty)])


@NEED_PA
class WeWritePyarrowReads(unittest.TestCase):
    def check(self, batch, expected_pa_type, values, nullable=True):
        t = pa_read(ipc.write_stream(batch))
        self.assertEqual(t.schema.field(0).type, expected_pa_type)
        self.assertEqual(t.schema.field(0).nullable, nullable)
        self.assertEqual(t.num_rows, len(values))
        t.validate(full=True)
        self.assertEqual(raw(t.column(0).combine_chunks()) if t.num_rows else [], values)

    def test_every_type_with_nulls(self):
        for name, ty, pty, values in cases():
            with self.subTest(name):
                self.check(ig_batch(ty, values), pty, values)

    def test_not_null_fields(self):
        for name, ty, pty, values in cases():
            if ty == ig.null:
                continue
            with self.subTest(name):
                vals = [v for v in values if v is not None]
                self.check(ig_batch(ty, vals, nullable=False), pty, vals, nullable=False)

    def test_empty_batch(self):
        for name, ty, pty, values in cases():
            with self.subTest(name):
                f = ig.Field("v", ty, ty == ig.null or name.startswith("u"))
                b = ig.Batch.empty(ig.Schema([f]))
                t = pa_read(ipc.write_stream(b))
                self.assertEqual(t.num_rows, 0)
                self.assertEqual(t.schema.field(0).type, pty)
                self.assertEqual(t.schema.field(0).nullable, f.nullable)

    def test_slices_with_offsets(self):
        # Non-multiple-of-8 offsets: bitmaps and string offsets get rebased.
        for name, ty, pty, values in cases():
            with self.subTest(name):
                full = ig_batch(ty, values * 3)
                for off, ln in ((0, 5), (3, 13), (8, 9), (11, 16), (27, 0)):
                    got = pa_read(ipc.write_stream(full.slice(off, ln)))
                    got.validate(full=True)
                    want = (values * 3)[off:off + ln]
                    self.assertEqual(raw(got.column(0).combine_chunks()) if ln else [], want)

    def test_multi_batch_stream(self):
        s = ig.Schema([ig.Field("a", ig.int64, False), ig.Field("s", ig.utf8)])
        batches = [ig.Batch.from_pydict({"a": list(range(i, i + 5)),
                                         "s": ["x%d" % j if j % 2 else None for j in range(5)]}, s)
                   for i in (0, 5, 10)]
        reader = pa.ipc.open_stream(ipc.write_stream(batches))
        got = list(reader)
        self.assertEqual([b.num_rows for b in got], [5, 5, 5])
        self.assertEqual(pa.Table.from_batches(got).column("a").to_pylist(), list(range(15)))

    def test_metadata_round_trip(self):
        s = ig.Schema([ig.Field("a", ig.int64, False, {"k": "v"})], {"top": "level"})
        t = pa_read(ipc.write_stream(ig.Batch.from_pydict({"a": [1, 2]}, s)))
        self.assertEqual(t.schema.field("a").metadata, {b"k": b"v"})
        self.assertEqual(t.schema.metadata, {b"top": b"level"})
        back = ipc.read_schema(ipc.write_stream(ig.Batch.from_pydict({"a": [1]}, s)))
        self.assertEqual(back, s)

    def test_none_is_empty_bytes_and_schema_stream(self):
        self.assertEqual(ipc.write_stream(None), b"")
        s = ig.Schema([ig.Field("a", ig.float64)])
        self.assertEqual(pa.ipc.open_stream(ipc.write_schema(s)).schema,
                         pa.schema([pa.field("a", pa.float64())]))

    def test_field_order_and_duplicate_names_kept(self):
        s = ig.Schema([ig.Field("z", ig.int8), ig.Field("a", ig.utf8, False), ig.Field("z", ig.int8)])
        b = ig.Batch(s, [ig.column([1], ig.int8), ig.column(["q"], ig.utf8), ig.column([2], ig.int8)])
        t = pa_read(ipc.write_stream(b))
        self.assertEqual(t.schema.names, ["z", "a", "z"])
        self.assertFalse(t.schema.field(1).nullable)

    def test_null_in_not_null_field_refused(self):
        b = ig.Batch([ig.Field("a", ig.int64, False)], [ig.column([1, None], ig.int64)])
        with self.assertRaisesRegex(ipc.IpcError, "`a`.*not null"):
            ipc.write_stream(b)

    def test_zero_copy_read(self):
        b = pa.record_batch([pa.array([1.5, 2.5]), pa.array(["a", "bc"])], names=["f", "s"])
        data = pa_stream([b])
        got = ipc.read_batch(data)
        self.assertIsInstance(got.column("f").values, memoryview)
        self.assertEqual(got.column("f").values.format, "d")
        self.assertIsInstance(got.column("s").offsets, memoryview)

    def test_round_trip_through_both(self):
        # pyarrow -> us -> pyarrow is the identity for every case.
        for name, ty, pty, values in cases():
            with self.subTest(name):
                b = pa.record_batch([pa.array(values, type=pty)], names=["v"])
                again = pa_read(ipc.write_stream(ipc.read_batch(pa_stream([b]))))
                self.assertTrue(again.equals(pa.Table.from_batches([b])), name)


if __name__ == "__main__":
    unittest.main()
