"""A small pure-Python Arrow IPC *stream* reader and writer.

Only what crosses idem's boundary: a schema message, record batches, the
end-of-stream marker. Flat (non-nested) columns of the types in
:mod:`idem_guest.datatypes`; no dictionaries, no compression (both refused with an
error naming the column). Metadata version V5 is written; V4 and V5 are read.

The flatbuffers are read with ``struct`` and a vtable lookup, and written
with a minimal forward builder (children after parents, every scalar aligned
to its size, every vector/table to 4 or 8 bytes), enough for Schema and
RecordBatch messages.

Reading is zero copy: columns hold ``memoryview`` slices of the input bytes.
"""

import struct

from . import datatypes as T
from .batch import Batch
from .column import BinaryColumn, BoolColumn, NullColumn, PrimitiveColumn
from .errors import IdemError
from .schema import Field, Schema

__all__ = ["IpcError", "read_stream", "read_batch", "read_schema", "write_stream",
           "write_schema", "CONTINUATION", "EOS"]


class IpcError(IdemError):
    """Malformed or unsupported Arrow IPC bytes."""


CONTINUATION = b"\xff\xff\xff\xff"
EOS = CONTINUATION + b"\x00\x00\x00\x00"

_u8 = struct.Struct("<B").unpack_from
_i16 = struct.Struct("<h").unpack_from
_u16 = struct.Struct("<H").unpack_from
_i32 = struct.Struct("<i").unpack_from
_u32 = struct.Struct("<I").unpack_from
_i64 = struct.Struct("<q").unpack_from

# Message header union
_H_SCHEMA, _H_DICT, _H_BATCH = 1, 2, 3
_HEADER_NAMES = {0: "NONE", 1: "Schema", 2: "DictionaryBatch", 3: "RecordBatch", 4: "Tensor",
                 5: "SparseTensor"}
V4, V5 = 3, 4

# Type union ids (Schema.fbs)
_TYPE_NAMES = {
    0: "NONE", 1: "Null", 2: "Int", 3: "FloatingPoint", 4: "Binary", 5: "Utf8", 6: "Bool",
    7: "Decimal", 8: "Date", 9: "Time", 10: "Timestamp", 11: "Interval", 12: "List",
    13: "Struct", 14: "Union", 15: "FixedSizeBinary", 16: "FixedSizeList", 17: "Map",
    18: "Duration", 19: "LargeBinary", 20: "LargeUtf8", 21: "LargeList", 22: "RunEndEncoded",
    23: "BinaryView", 24: "Utf8View", 25: "ListView", 26: "LargeListView",
}


# ---------------------------------------------------------------------------
# flatbuffer reading


class _Table:
    __slots__ = ("b", "pos", "vt", "vtlen")

    def __init__(self, b, pos):
        if pos < 0 or pos + 4 > len(b):
            raise IpcError("flatbuffer table out of range")
        self.b = b
        self.pos = pos
        vt = pos - _i32(b, pos)[0]
        if vt < 0 or vt + 4 > len(b):
            raise IpcError("flatbuffer vtable out of range")
        self.vt = vt
        self.vtlen = _u16(b, vt)[0]

    def _at(self, slot):
        o = 4 + 2 * slot
        if o + 2 > self.vtlen:
            return 0
        return _u16(self.b, self.vt + o)[0]

    def get(self, slot, unpack, default):
        o = self._at(slot)
        return unpack(self.b, self.pos + o)[0] if o else default

    def table(self, slot):
        o = self._at(slot)
        if not o:
            return None
        p = self.pos + o
        return _Table(self.b, p + _u32(self.b, p)[0])

    def vector(self, slot):
        """(position of the first element, element count), or None."""
        o = self._at(slot)
        if not o:
            return None
        p = self.pos + o
        v = p + _u32(self.b, p)[0]
        if v + 4 > len(self.b):
            raise IpcError("flatbuffer vector out of range")
        return v + 4, _u32(self.b, v)[0]

    def string(self, slot):
        vec = self.vector(slot)
        if vec is None:
            return None
        start, n = vec
        if start + n > len(self.b):
            raise IpcError("flatbuffer string out of range")
        return bytes(self.b[start:start + n]).decode("utf-8")

    def tables(self, slot):
        vec = self.vector(slot)
        if vec is None:
            return []
        start, n = vec
        b = self.b
        return [_Table(b, start + 4 * i + _u32(b, start + 4 * i)[0]) for i in range(n)]


def _key_values(t, slot):
    out = {}
    for kv in t.tables(slot):
        out[kv.string(0) or ""] = kv.string(1) or ""
    return out


def _parse_type(tid, tt, children, name):
    get = (lambda slot, unpack, default: tt.get(slot, unpack, default)) if tt is not None else (
        lambda slot, unpack, default: default)
    if tid == 1:
        return T.null
    if tid == 2:
        bw, signed = get(0, _i32, 0), bool(get(1, _u8, 0))
        ty = T._INTS.get((bw, signed))
        return ty or T.unsupported("Int(%d, %s)" % (bw, signed))
    if tid == 3:
        prec = get(0, _i16, 0)
        return {1: T.float32, 2: T.float64}.get(prec) or T.unsupported("Float16")
    if tid == 4:
        return T.binary
    if tid == 5:
        return T.utf8
    if tid == 6:
        return T.boolean
    if tid == 8:
        return T.date32 if get(0, _i16, 1) == 0 else T.date64
    if tid == 9:
        unit, bw = T.TIME_UNITS[get(0, _i16, 1) & 3], get(1, _i32, 32)
        if bw == 32 and unit in ("s", "ms"):
            return T.time32(unit)
        if bw == 64 and unit in ("us", "ns"):
            return T.time64(unit)
        return T.unsupported("Time%d(%s)" % (bw, unit))
    if tid == 10:
        unit = T.TIME_UNITS[get(0, _i16, 0) & 3]
        tz = tt.string(1) if tt is not None else None
        return T.timestamp(unit, tz)
    if tid == 18:
        return T.duration(T.TIME_UNITS[get(0, _i16, 1) & 3])
    if tid == 19:
        return T.large_binary
    if tid == 20:
        return T.large_utf8
    if tid == 7:
        return T.unsupported("Decimal%d(%d, %d)" % (get(2, _i32, 128), get(0, _i32, 0), get(1, _i32, 0)))
    if tid == 15:
        return T.unsupported("FixedSizeBinary(%d)" % get(0, _i32, 0))
    if tid in (12, 16, 21, 25, 26) and children:
        return T.unsupported("%s<%s>" % (_TYPE_NAMES[tid], _parse_field(children[0]).type))
    return T.unsupported(_TYPE_NAMES.get(tid, "type #%d" % tid))


def _parse_field(ft):
    name = ft.string(0) or ""
    nullable = bool(ft.get(1, _u8, 0))
    tid = ft.get(2, _u8, 0)
    ty = _parse_type(tid, ft.table(3), ft.tables(5), name)
    if ft.table(4) is not None:
        ty = T.unsupported("Dictionary<%s>" % ty)
    return Field(name, ty, nullable, _key_values(ft, 6))


def _parse_schema(t):
    if t.get(0, _i16, 0) != 0:
        raise IpcError("big-endian IPC data is not supported")
    return Schema([_parse_field(f) for f in t.tables(1)], _key_values(t, 2))


_schema_cache = {}


def _schema_from_meta(meta, header):
    key = bytes(meta)
    s = _schema_cache.get(key)
    if s is None:
        s = _parse_schema(header)
        if len(_schema_cache) > 32:
            _schema_cache.clear()
        _schema_cache[key] = s
    return s


def _messages(data):
    """Yield (header_type, header table, metadata bytes, body memoryview)."""
    mv = memoryview(data)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    n = len(mv)
    pos = 0
    while pos < n:
        if pos + 4 > n:
            raise IpcError("truncated IPC stream (message length)")
        size = _i32(mv, pos)[0]
        pos += 4
        if size == -1:
            if pos + 4 > n:
                raise IpcError("truncated IPC stream (message length)")
            size = _i32(mv, pos)[0]
            pos += 4
        if size == 0:
            return
        if size < 0 or pos + size > n:
            raise IpcError("truncated IPC stream (message metadata)")
        meta = mv[pos:pos + size]
        pos += size
        root = _Table(meta, _u32(meta, 0)[0])
        version = root.get(0, _i16, 0)
        if version < V4:
            raise IpcError("unsupported IPC metadata version V%d (need V4 or V5)" % (version + 1))
        htype = root.get(1, _u8, 0)
        header = root.table(2)
        body_len = root.get(3, _i64, 0)
        if body_len < 0 or pos + body_len > n:
            raise IpcError("truncated IPC stream (message body)")
        body = mv[pos:pos + body_len]
        pos += body_len
        if header is None:
            raise IpcError("IPC message without a header")
        yield htype, header, meta, body


def _read_record_batch(schema, rb, body):
    length = rb.get(0, _i64, 0)
    if rb.table(3) is not None:
        raise IpcError("compressed IPC buffers (LZ4/ZSTD) are not supported; "
                       "the host sends uncompressed batches")
    b = rb.b
    nodes_vec = rb.vector(1) or (0, 0)
    bufs_vec = rb.vector(2) or (0, 0)
    nn, nb = nodes_vec[1], bufs_vec[1]
    nodes = struct.unpack_from("<%dq" % (2 * nn), b, nodes_vec[0]) if nn else ()
    bufs = struct.unpack_from("<%dq" % (2 * nb), b, bufs_vec[0]) if nb else ()
    blen = len(body)
    ni = bi = 0
    cols = []

    def buf(i, need=None):
        off, ln = bufs[2 * i], bufs[2 * i + 1]
        if off < 0 or ln < 0 or off + ln > blen:
            raise IpcError("column `%s`: buffer %d out of the message body" % (f.name, i))
        if need is not None:
            if ln < need:
                raise IpcError("column `%s`: buffer of %d bytes, need %d" % (f.name, ln, need))
            ln = need
        return body[off:off + ln]

    for f in schema.fields:
        ty = f.type
        kind = ty.kind
        if kind == "unsupported":
            raise IpcError("column `%s` has type %s, which the Python SDK cannot read; "
                           "leave it out with columns()" % (f.name, ty))
        if ni >= nn:
            raise IpcError("record batch has fewer field nodes than the schema has columns")
        n, nulls = nodes[2 * ni], nodes[2 * ni + 1]
        ni += 1
        if n != length:
            raise IpcError("column `%s` has %d rows in a batch of %d" % (f.name, n, length))
        if kind == "null":
            cols.append(NullColumn(n))
            continue
        need_bufs = 3 if kind == "bin" else 2
        if bi + need_bufs > nb:
            raise IpcError("record batch has fewer buffers than its columns need")
        validity = buf(bi, (n + 7) // 8) if nulls else None
        if kind == "prim":
            values = buf(bi + 1, n * ty.width).cast(ty.fmt)
            cols.append(PrimitiveColumn(ty, values, validity, nulls))
        elif kind == "bool":
            cols.append(BoolColumn(buf(bi + 1, (n + 7) // 8), n, validity, nulls))
        else:  # bin
            if n == 0 and bufs[2 * (bi + 1) + 1] == 0:
                offsets = memoryview(bytes(ty.width)).cast(ty.fmt)
            else:
                offsets = buf(bi + 1, (n + 1) * ty.width).cast(ty.fmt)
            end = offsets[-1]
            data = buf(bi + 2)
            if end > len(data) or offsets[0] < 0 or offsets[0] > end:
                raise IpcError("column `%s`: offsets out of the data buffer" % f.name)
            cols.append(BinaryColumn(ty, offsets, data, validity, nulls))
        bi += need_bufs
    return Batch(schema, cols, length)


def read_stream(data):
    """Decode an IPC stream: ``(schema, [batches])``. Empty bytes give
    ``(None, [])`` ("no rows")."""
    if not data:
        return None, []
    schema = None
    batches = []
    for htype, header, meta, body in _messages(data):
        if htype == _H_SCHEMA:
            if schema is not None:
                raise IpcError("a second schema in one stream")
            schema = _schema_from_meta(meta, header)
        elif htype == _H_BATCH:
            if schema is None:
                raise IpcError("record batch before the schema")
            batches.append(_read_record_batch(schema, header, body))
        elif htype == _H_DICT:
            names = [f.name for f in (schema.fields if schema else ())
                     if f.type.name.startswith("Dictionary<")]
            raise IpcError("dictionary-encoded column%s %s: not supported by the Python SDK; "
                           "leave it out with columns()" % (
                               "s" if len(names) != 1 else "",
                               ", ".join("`%s`" % n for n in names) or "?"))
        else:
            raise IpcError("unexpected IPC message %s" % _HEADER_NAMES.get(htype, htype))
    if schema is None:
        raise IpcError("IPC stream without a schema")
    return schema, batches


def read_batch(data):
    """Decode a stream into one batch (several are concatenated), or None
    when it holds no batch."""
    schema, batches = read_stream(data)
    if not batches:
        return None
    return batches[0] if len(batches) == 1 else Batch.concat(batches)


def read_schema(data):
    """The schema of an IPC stream (its batches are not decoded)."""
    for htype, header, meta, body in _messages(data):
        if htype == _H_SCHEMA:
            return _schema_from_meta(meta, header)
        raise IpcError("IPC stream does not start with a schema")
    raise IpcError("IPC stream without a schema")


# ---------------------------------------------------------------------------
# flatbuffer writing

_SIZES = {"?": 1, "B": 1, "b": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "off": 4}
_pack_into = struct.pack_into


def _emit(buf, obj):
    """Append ``obj`` to ``buf`` (a bytearray); return its position."""
    kind = obj[0]
    if kind == "table":
        fields = obj[1]
        layout = {}
        cur = 4
        for slot, code, _ in sorted(fields, key=lambda f: -_SIZES[f[1]]):
            size = _SIZES[code]
            cur += (-cur) % size
            layout[slot] = cur
            cur += size
        tsize = cur + (-cur) % 4
        nslots = max(layout) + 1 if layout else 0
        vt = struct.pack("<HH%dH" % nslots, 4 + 2 * nslots, tsize,
                         *[layout.get(i, 0) for i in range(nslots)])
        if len(buf) % 2:
            buf.append(0)
        vtpos = len(buf)
        buf += vt
        buf += bytes((-len(buf)) % 8)
        tpos = len(buf)
        buf += bytes(tsize)
        _pack_into("<i", buf, tpos, tpos - vtpos)
        children = []
        for slot, code, value in fields:
            if code == "off":
                children.append((tpos + layout[slot], value))
            else:
                _pack_into("<" + code, buf, tpos + layout[slot], value)
        for fpos, child in children:
            cpos = _emit(buf, child)
            _pack_into("<I", buf, fpos, cpos - fpos)
        return tpos
    if kind == "str":
        data = obj[1].encode("utf-8")
        buf += bytes((-len(buf)) % 4)
        pos = len(buf)
        buf += struct.pack("<I", len(data)) + data + b"\x00"
        return pos
    if kind == "vstruct":  # (kind, raw bytes, count, element alignment)
        _, raw, count, align = obj
        buf += bytes((-(len(buf) + 4)) % align)
        pos = len(buf)
        buf += struct.pack("<I", count)
        buf += raw
        return pos
    if kind == "voff":  # vector of tables/strings
        items = obj[1]
        buf += bytes((-len(buf)) % 4)
        pos = len(buf)
        buf += struct.pack("<I", len(items)) + bytes(4 * len(items))
        for i, child in enumerate(items):
            cpos = _emit(buf, child)
            epos = pos + 4 + 4 * i
            _pack_into("<I", buf, epos, cpos - epos)
        return pos
    raise AssertionError(kind)


def _finish(root):
    buf = bytearray(4)
    _pack_into("<I", buf, 0, _emit(buf, root))
    buf += bytes((-len(buf)) % 8)
    return bytes(buf)


def _kv(metadata):
    return ("voff", [("table", [(0, "off", ("str", str(k))), (1, "off", ("str", str(v)))])
                     for k, v in metadata.items()])


_UNIT_IDS = {u: i for i, u in enumerate(T.TIME_UNITS)}


def _type_fb(f):
    ty = f.type
    name = ty.name
    if name == "Null":
        return 1, ("table", [])
    if ty.is_integer:
        return 2, ("table", [(0, "i", ty.width * 8), (1, "?", name.startswith("Int"))])
    if name == "Float32":
        return 3, ("table", [(0, "h", 1)])
    if name == "Float64":
        return 3, ("table", [(0, "h", 2)])
    if name == "Binary":
        return 4, ("table", [])
    if name == "Utf8":
        return 5, ("table", [])
    if name == "Boolean":
        return 6, ("table", [])
    if name == "Date32":
        return 8, ("table", [(0, "h", 0)])
    if name == "Date64":
        return 8, ("table", [(0, "h", 1)])
    if name in ("Time32", "Time64"):
        return 9, ("table", [(0, "h", _UNIT_IDS[ty.unit]), (1, "i", ty.width * 8)])
    if name == "Timestamp":
        fields = [(0, "h", _UNIT_IDS[ty.unit])]
        if ty.tz is not None:
            fields.append((1, "off", ("str", ty.tz)))
        return 10, ("table", fields)
    if name == "Duration":
        return 18, ("table", [(0, "h", _UNIT_IDS[ty.unit])])
    if name == "LargeBinary":
        return 19, ("table", [])
    if name == "LargeUtf8":
        return 20, ("table", [])
    raise IpcError("column `%s` has type %s, which the Python SDK cannot write" % (f.name, ty))


def _field_fb(f):
    tid, tt = _type_fb(f)
    fields = [(0, "off", ("str", f.name)), (1, "?", f.nullable), (2, "B", tid), (3, "off", tt),
              (5, "off", ("voff", []))]
    if f.metadata:
        fields.append((6, "off", _kv(f.metadata)))
    return ("table", fields)


def _frame(meta, body_parts=()):
    return [CONTINUATION, struct.pack("<i", len(meta)), meta, *body_parts]


def _schema_message(schema):
    cached = schema._ipc
    if cached is None:
        fields = [(1, "off", ("voff", [_field_fb(f) for f in schema.fields]))]
        if schema.metadata:
            fields.append((2, "off", _kv(schema.metadata)))
        header = ("table", fields)
        msg = ("table", [(0, "h", V5), (1, "B", _H_SCHEMA), (2, "off", header), (3, "q", 0)])
        cached = b"".join(_frame(_finish(msg)))
        schema._ipc = cached
    return cached


_PAD = bytes(8)


def _batch_message(batch):
    nodes = []
    bufs = []
    parts = []
    pos = 0

    def add(b):
        nonlocal pos
        ln = b.nbytes if isinstance(b, memoryview) else len(b) * getattr(b, "itemsize", 1)
        bufs.append(pos)
        bufs.append(ln)
        if ln:
            parts.append(b)
            pad = (-ln) % 8
            if pad:
                parts.append(_PAD[:pad])
            pos += ln + pad

    n = batch.num_rows
    for f, c in zip(batch.schema.fields, batch.columns):
        kind = f.type.kind
        if kind == "unsupported":
            _type_fb(f)  # raises, naming the column
        nodes.append(c.length)
        nodes.append(c.null_count)
        if kind == "null":
            continue
        if c.null_count:
            add(c.validity[:(n + 7) // 8])
        else:
            add(b"")
        if kind == "prim":
            add(c.values)
        elif kind == "bool":
            add(c.bits[:(n + 7) // 8])
        else:
            offsets, data = c.compact()
            add(offsets)
            add(data)
    header = ("table", [
        (0, "q", n),
        (1, "off", ("vstruct", struct.pack("<%dq" % len(nodes), *nodes), len(nodes) // 2, 8)),
        (2, "off", ("vstruct", struct.pack("<%dq" % len(bufs), *bufs), len(bufs) // 2, 8)),
    ])
    msg = ("table", [(0, "h", V5), (1, "B", _H_BATCH), (2, "off", header), (3, "q", pos)])
    return _frame(_finish(msg), parts)


def _check_batch(batch):
    for f, c in zip(batch.schema.fields, batch.columns):
        if c.null_count and not f.nullable and f.type.kind != "null":
            raise IpcError("column `%s` is declared not null but has %d null rows"
                           % (f.name, c.null_count))


def write_stream(batches, schema=None):
    """Encode a batch (or a list of batches of one schema) as one IPC
    stream: schema message, record batches, end-of-stream marker. ``None``
    encodes to ``b""`` ("no rows")."""
    if batches is None:
        return b""
    if isinstance(batches, Batch):
        batches = [batches]
    batches = list(batches)
    if schema is None:
        if not batches:
            raise IpcError("write_stream: no batches and no schema")
        schema = batches[0].schema
    parts = [_schema_message(schema)]
    for b in batches:
        if b.schema is not schema and b.schema.fields != schema.fields:
            raise IpcError("write_stream: batches with different schemas")
        _check_batch(b)
        parts += _batch_message(b)
    parts.append(EOS)
    return b"".join(parts)


def write_schema(schema):
    """A stream holding only ``schema`` (the shape of ``ctx.input_schema``)."""
    return _schema_message(schema) + EOS
