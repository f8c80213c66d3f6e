"""Columns: Arrow arrays over plain Python buffers.

Every column has a ``type`` (:class:`~idem_guest.datatypes.DataType`), a length,
a ``null_count`` and a validity bitmap (``None`` when nothing is null).
Fixed-width values live in ``values``: a ``memoryview`` cast straight onto the
input IPC buffer (zero copy) or an ``array.array`` for columns built here.
Strings and binaries keep Arrow's ``offsets`` + ``data`` layout and decode a
row only when asked (``col[i]``, ``to_pylist()``).

Row-wise work is done with C-level iterators (``map``, ``itertools.compress``,
``bytes.join``) wherever possible: a Python ``for`` loop per row is what makes
pure-Python columnar code slow.

Masks are ``bytes`` with one 0/1 byte per row (see :func:`as_mask`); they are
cheap to combine with :func:`mask_and` / :func:`mask_or` / :func:`mask_not`.
"""

import re
import struct as _struct
from array import array
from itertools import accumulate, compress, repeat
from operator import add, getitem, is_not, itemgetter, mul, sub

from . import datatypes as T
from .errors import IdemError

builtins_type = type

__all__ = [
    "Column", "NullColumn", "BoolColumn", "PrimitiveColumn", "BinaryColumn",
    "column", "bits_to_bytes", "bytes_to_bits", "as_mask", "mask_and",
    "mask_or", "mask_not", "concat_columns",
]

# ---------------------------------------------------------------------------
# bitmaps <-> one byte per row

_UNPACK = [bytes((b >> i) & 1 for i in range(8)) for b in range(256)]
_UNPACK_GET = _UNPACK.__getitem__
_NORM = bytes([0]) + bytes([1]) * 255  # translate table: nonzero -> 1
_FLIP = bytes([1]) + bytes([0]) * 255  # translate table: zero -> 1, else 0
_RUN = re.compile(b"\x01+")

_masks = [0, 0, 0, 0]  # cached bit-gather masks, grown on demand


def bits_to_bytes(bitmap, n, offset=0):
    """An Arrow bitmap (LSB first) as ``n`` bytes of 0/1, from bit ``offset``."""
    if n <= 0:
        return b""
    start, shift = divmod(offset, 8)
    end = (offset + n + 7) // 8
    raw = bitmap[start:end]
    if len(raw) < end - start:
        raise IdemError("bitmap too short: %d bytes for %d bits" % (len(bitmap), offset + n))
    out = b"".join(map(_UNPACK_GET, raw))
    if shift or len(out) != n:
        out = out[shift:shift + n]
    return out


def _gather_masks(nbytes):
    if _masks[0] < nbytes:
        size = max(nbytes, 2 * _masks[0], 1 << 14)
        size += (-size) % 8
        _masks[0] = size
        _masks[1] = int.from_bytes(b"\x03\x00" * (size // 2), "little")
        _masks[2] = int.from_bytes(b"\x0f\x00\x00\x00" * (size // 4), "little")
        _masks[3] = int.from_bytes((b"\xff" + bytes(7)) * (size // 8), "little")
    return _masks


def bytes_to_bits(b01):
    """``n`` bytes of 0/1 as an Arrow bitmap of ``ceil(n/8)`` bytes.

    Pure big-int arithmetic (three shift/or/and rounds gather every 8th bit),
    so the loop runs in C."""
    n = len(b01)
    if n == 0:
        return b""
    pad = (-n) % 8
    if pad:
        b01 = bytes(b01) + bytes(pad)
    m = _gather_masks(n + pad)
    x = int.from_bytes(b01, "little")
    x = (x | (x >> 7)) & m[1]
    x = (x | (x >> 14)) & m[2]
    x = (x | (x >> 28)) & m[3]
    return x.to_bytes(n + pad, "little")[::8]


def _count_ones(b01):
    return len(b01) - b01.count(0)


def mask_and(a, b):
    """Row-wise AND of two 0/1 masks (``None`` means all ones)."""
    if a is None:
        return b
    if b is None:
        return a
    n = len(a)
    if len(b) != n:
        raise IdemError("masks of different lengths: %d and %d" % (n, len(b)))
    return (int.from_bytes(a, "little") & int.from_bytes(b, "little")).to_bytes(n, "little")


def mask_or(a, b):
    """Row-wise OR of two 0/1 masks."""
    n = len(a)
    if len(b) != n:
        raise IdemError("masks of different lengths: %d and %d" % (n, len(b)))
    return (int.from_bytes(a, "little") | int.from_bytes(b, "little")).to_bytes(n, "little")


def mask_not(a):
    """Row-wise NOT of a 0/1 mask."""
    return bytes(a).translate(_FLIP)


def as_mask(mask, n):
    """Normalize a filter mask to ``n`` bytes of 0/1.

    Accepts a 0/1 ``bytes``/``bytearray`` (any nonzero byte counts as true),
    a Boolean :class:`Column` (null counts as false), or any iterable of truthy
    values (``list`` of bools, a generator...)."""
    if isinstance(mask, BoolColumn):
        m = mask_and(mask.values01(), mask.valid01())
    elif isinstance(mask, (bytes, bytearray, memoryview)):
        m = bytes(mask).translate(_NORM)
    elif isinstance(mask, Column):
        raise IdemError("a filter mask must be a Boolean column, not %s" % mask.type)
    else:
        try:
            m = bytes(mask)
        except (TypeError, ValueError):
            m = bytes(map(bool, mask))
        else:
            m = m.translate(_NORM)
    if len(m) != n:
        raise IdemError("mask has %d entries for %d rows" % (len(m), n))
    return m


class Selection:
    """A normalized mask plus what filtering needs, computed once and shared
    by every column of a batch: the kept count and, when the kept rows form
    few runs, the runs' ``starts``/``ends`` (then columns copy whole runs as
    raw bytes, with C-level ``map`` chains and no per-row work)."""

    __slots__ = ("mask", "n", "kept", "starts", "ends", "_scaled")

    def __init__(self, mask, n=None):
        if n is None:
            n = len(mask)
        mask = as_mask(mask, n)
        self.mask = mask
        self.n = n
        self.kept = n - mask.count(0)
        self.starts = self.ends = None
        self._scaled = {}
        if 0 < self.kept < n:
            runs = mask.count(b"\x00\x01") + (mask[0] == 1)
            if runs * 4 <= self.kept:
                spans = list(map(_SPAN, _RUN.finditer(mask)))
                self.starts = list(map(_FIRST, spans))
                self.ends = list(map(_SECOND, spans))

    def gather(self, raw, width=1):
        """The kept rows of ``raw`` (a byte buffer of ``width`` bytes per
        row) as one ``bytes``."""
        if self.starts is not None:
            return b"".join(map(getitem, repeat(raw), self.slices(width)))
        if width == 1:
            return bytes(compress(raw, self.mask))
        return None  # caller filters element-wise

    def slices(self, width=1, shift=0):
        """``slice`` objects of the kept runs in a buffer of ``width`` bytes
        per row, starting ``shift`` rows in (cached per width/shift)."""
        key = (width, shift)
        sl = self._scaled.get(key)
        if sl is None:
            if width == 1 and not shift:
                sl = list(map(slice, self.starts, self.ends))
            else:
                st = map(mul, map(add, self.starts, repeat(shift)), repeat(width))
                en = map(mul, map(add, self.ends, repeat(shift)), repeat(width))
                sl = list(map(slice, st, en))
            self._scaled[key] = sl
        return sl


_SPAN = re.Match.span if hasattr(re, "Match") else type(re.match(b"", b"")).span
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_LANE_PACK = {4: _struct.Struct("<I").pack, 8: _struct.Struct("<Q").pack}


def _as_selection(mask, n):
    return mask if isinstance(mask, Selection) else Selection(mask, n)


def _check_indices(indices, n):
    if not isinstance(indices, (array, list, tuple, range, memoryview)):
        indices = list(indices)
    if len(indices):
        lo, hi = min(indices), max(indices)
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise IdemError("take: index %d out of range for %d rows" % (bad, n))
    return indices


# ---------------------------------------------------------------------------


class Column:
    """Base class of every column."""

    __slots__ = ("type", "length", "null_count", "validity", "_v01")

    def _init_validity(self, validity, null_count):
        if validity is not None and null_count is None:
            v01 = bits_to_bytes(validity, self.length)
            null_count = self.length - _count_ones(v01)
            self._v01 = v01
        else:
            self._v01 = None
        if not null_count:
            validity = None
            null_count = 0
        self.validity = validity
        self.null_count = null_count

    def __len__(self):
        return self.length

    def valid01(self):
        """One 0/1 byte per row (1 = not null), or ``None`` when no row is null."""
        if self.validity is None:
            return None
        if self._v01 is None:
            self._v01 = bits_to_bytes(self.validity, self.length)
        return self._v01

    def is_valid(self, i):
        """Whether row ``i`` is not null."""
        if self.validity is None:
            return True
        if i < 0:
            i += self.length
        return bool(self.validity[i >> 3] >> (i & 7) & 1)

    def is_null(self, i):
        return not self.is_valid(i)

    def _index(self, i):
        if i < 0:
            i += self.length
        if not 0 <= i < self.length:
            raise IndexError("row %d out of range for a column of %d rows" % (i, self.length))
        return i

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(self.length)
            if step != 1:
                return self.take(range(start, stop, step))
            return self.slice(start, max(0, stop - start))
        i = self._index(i)
        if self.validity is not None and not (self.validity[i >> 3] >> (i & 7) & 1):
            return None
        return self._value(i)

    def __iter__(self):
        return iter(self.to_pylist())

    def __repr__(self):
        head = self.to_pylist() if self.length <= 10 else self.slice(0, 10).to_pylist() + ["..."]
        return "<%s %s len=%d nulls=%d %r>" % (
            type(self).__name__, self.type, self.length, self.null_count, head)

    def __eq__(self, other):
        return (isinstance(other, Column) and self.type == other.type
                and self.length == other.length and self.to_pylist() == other.to_pylist())

    __hash__ = None

    def equals(self, other):
        return self == other

    # subclasses: _value, to_pylist, _filter, take, slice

    def _filter_validity(self, sel):
        v01 = self.valid01()
        if v01 is None:
            return None, 0
        kept = sel.gather(v01)
        nulls = len(kept) - _count_ones(kept)
        return (bytes_to_bits(kept) if nulls else None), nulls

    def filter(self, mask):
        """The rows where ``mask`` is true (see :func:`as_mask`)."""
        sel = _as_selection(mask, self.length)
        if sel.kept == self.length:
            return self
        return self._filter(sel)

    def _take_validity(self, indices):
        v01 = self.valid01()
        if v01 is None:
            return None, 0
        kept = bytes([v01[i] for i in indices])
        nulls = len(kept) - _count_ones(kept)
        return (bytes_to_bits(kept) if nulls else None), nulls

    def _slice_validity(self, offset, length):
        if self.validity is None:
            return None, 0
        if offset % 8 == 0:
            bm = self.validity[offset // 8:(offset + length + 7) // 8]
            return bm, None
        v01 = self.valid01()[offset:offset + length]
        nulls = length - _count_ones(v01)
        return (bytes_to_bits(v01) if nulls else None), nulls

    def _with_nulls_list(self, values):
        v01 = self.valid01()
        if v01 is None:
            return values
        return [v if ok else None for v, ok in zip(values, v01)]


class NullColumn(Column):
    """A column of type Null: every row is null."""

    __slots__ = ()

    def __init__(self, length):
        self.type = T.null
        self.length = length
        self.null_count = length
        self.validity = None
        self._v01 = None

    def valid01(self):
        return bytes(self.length)

    def is_valid(self, i):
        return False

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Column.__getitem__(self, i)
        self._index(i)
        return None

    def to_pylist(self):
        return [None] * self.length

    def _filter(self, sel):
        return NullColumn(sel.kept)

    def take(self, indices):
        return NullColumn(len(_check_indices(indices, self.length)))

    def slice(self, offset, length):
        offset, length = _clip(offset, length, self.length)
        return NullColumn(length)


class PrimitiveColumn(Column):
    """Fixed-width values: integers, floats, dates, times, timestamps.

    ``values`` is a sequence with the type's typecode (``'q'`` for Int64,
    ``'d'`` for Float64, ``'i'`` for Date32...): a ``memoryview`` onto the
    input buffer or an ``array.array``. Slots of null rows hold unspecified
    values; ``values`` never says which rows are null (see ``valid01()``)."""

    __slots__ = ("values",)

    def __init__(self, type, values, validity=None, null_count=None):
        if type.kind != "prim":
            raise IdemError("PrimitiveColumn needs a fixed-width type, not %s" % type)
        values = _typed(values, type)
        self.type = type
        self.values = values
        self.length = len(values)
        self._init_validity(validity, null_count)

    def _value(self, i):
        return self.values[i]

    def to_pylist(self):
        return self._with_nulls_list(self.values.tolist())

    def filled(self):
        """The values as a list (null slots hold whatever the buffer has)."""
        return self.values.tolist()

    def _filter(self, sel):
        validity, nulls = self._filter_validity(sel)
        values = self.values
        if sel.starts is not None:
            raw = values if isinstance(values, memoryview) else memoryview(values)
            if raw.format != "B":
                raw = raw.cast("B")
            out = memoryview(sel.gather(raw, self.type.width)).cast(self.type.fmt)
        else:
            out = _pack(self.type.fmt, list(compress(values, sel.mask)))
        return PrimitiveColumn(self.type, out, validity, nulls)

    def take(self, indices):
        indices = _check_indices(indices, self.length)
        validity, nulls = self._take_validity(indices)
        vl = self.values.tolist()
        return PrimitiveColumn(self.type, _pack(self.type.fmt, [vl[i] for i in indices]),
                               validity, nulls)

    def slice(self, offset, length):
        offset, length = _clip(offset, length, self.length)
        validity, nulls = self._slice_validity(offset, length)
        values = self.values
        if not isinstance(values, memoryview):
            values = memoryview(values)
        return PrimitiveColumn(self.type, values[offset:offset + length], validity, nulls)


def _typed(values, type):
    """``values`` as an array/memoryview with ``type``'s typecode."""
    if isinstance(values, memoryview):
        fmt = values.format
    elif isinstance(values, array):
        fmt = values.typecode
    else:
        try:
            return array(type.fmt, values)
        except (TypeError, OverflowError) as e:
            raise IdemError("cannot build a %s column: %s" % (type, e)) from None
    if fmt == type.fmt:
        return values
    mv = memoryview(values)
    same_kind = (fmt in "bhilqBHILQ" and type.fmt in "bhilqBHILQ"
                 and fmt.islower() == type.fmt.islower())
    if fmt == "B" or (mv.itemsize == type.width and same_kind):
        mv = mv.cast("B") if fmt != "B" else mv
        if len(mv) % type.width:
            raise IdemError("%d bytes are not a whole number of %s values" % (len(mv), type))
        return mv.cast(type.fmt)
    raise IdemError("%s values need typecode %r, got %r" % (type, type.fmt, fmt))


def _pack(fmt, values):
    """A list of numbers as a zero-copy memoryview of typecode ``fmt``
    (``struct.pack`` beats ``array(fmt, list)`` by 2x)."""
    try:
        return memoryview(_struct.pack("<%d%s" % (len(values), fmt), *values)).cast(fmt)
    except _struct.error:
        return array(fmt, values)  # raises the clearer OverflowError/TypeError


class BoolColumn(Column):
    """Booleans, bit-packed. ``values01()`` gives one 0/1 byte per row."""

    __slots__ = ("bits", "_b01")

    def __init__(self, bits, length, validity=None, null_count=None):
        self.type = T.boolean
        self.bits = bits
        self.length = length
        self._b01 = None
        if len(bits) * 8 < length:
            raise IdemError("Boolean bitmap too short: %d bytes for %d rows" % (len(bits), length))
        self._init_validity(validity, null_count)

    @classmethod
    def from_mask(cls, b01, validity01=None):
        """A Boolean column from 0/1 bytes (and optional 0/1 validity)."""
        b01 = bytes(b01).translate(_NORM)
        col = cls(bytes_to_bits(b01), len(b01),
                  None if validity01 is None else bytes_to_bits(bytes(validity01).translate(_NORM)))
        col._b01 = b01
        return col

    def values01(self):
        if self._b01 is None:
            self._b01 = bits_to_bytes(self.bits, self.length)
        return self._b01

    def _value(self, i):
        return bool(self.bits[i >> 3] >> (i & 7) & 1)

    def to_pylist(self):
        return self._with_nulls_list(list(map(bool, self.values01())))

    def _filter(self, sel):
        validity, nulls = self._filter_validity(sel)
        kept = sel.gather(self.values01())
        return BoolColumn(bytes_to_bits(kept), len(kept), validity, nulls)

    def take(self, indices):
        indices = _check_indices(indices, self.length)
        validity, nulls = self._take_validity(indices)
        b01 = self.values01()
        kept = bytes([b01[i] for i in indices])
        return BoolColumn(bytes_to_bits(kept), len(kept), validity, nulls)

    def slice(self, offset, length):
        offset, length = _clip(offset, length, self.length)
        validity, nulls = self._slice_validity(offset, length)
        if offset % 8 == 0:
            bits = self.bits[offset // 8:(offset + length + 7) // 8]
        else:
            bits = bytes_to_bits(self.values01()[offset:offset + length])
        return BoolColumn(bits, length, validity, nulls)


class BinaryColumn(Column):
    """Utf8 / LargeUtf8 / Binary / LargeBinary: ``offsets`` (``length + 1``
    entries, typecode ``'i'`` or ``'q'``) into ``data``. Row ``i`` is
    ``data[offsets[i]:offsets[i+1]]``; ``col[i]`` decodes just that row."""

    __slots__ = ("offsets", "data", "_bytes")

    def __init__(self, type, offsets, data, validity=None, null_count=None):
        if type.kind != "bin":
            raise IdemError("BinaryColumn needs a string or binary type, not %s" % type)
        if not isinstance(offsets, (array, memoryview)):
            offsets = array(type.fmt, offsets)
        if len(offsets) == 0:
            offsets = array(type.fmt, [0])
        self.type = type
        self.offsets = offsets
        self.data = data
        self.length = len(offsets) - 1
        self._bytes = None
        self._init_validity(validity, null_count)

    @classmethod
    def from_parts(cls, type, parts, validity=None, null_count=None):
        """A column whose rows are the ``bytes`` in ``parts`` (UTF-8 for
        string types; not checked). Two C-level passes: lengths, join."""
        if not isinstance(parts, list):
            parts = list(parts)
        offsets = array(type.fmt, accumulate(map(len, parts), initial=0))
        if type.fmt == "i" and offsets[-1] > 0x7FFFFFFF:
            raise IdemError("%s column data exceeds 2 GiB; use large_utf8/large_binary" % type)
        return cls(type, offsets, b"".join(parts), validity, null_count)

    def _data_bytes(self):
        """``data`` as ``bytes`` (one copy, cached): slicing bytes is cheaper
        than slicing a memoryview, and bytes slices are hashable."""
        b = self._bytes
        if b is None:
            b = self.data if type(self.data) is bytes else bytes(self.data)
            self._bytes = b
        return b

    def _value(self, i):
        b = self._data_bytes()[self.offsets[i]:self.offsets[i + 1]]
        return b.decode("utf-8") if self.type.is_string else b

    def iter_bytes(self):
        """Each row's bytes (``b''`` for null rows), without decoding: the
        fastest way to group or compare strings (UTF-8 bytes sort in code
        point order)."""
        return iter(self.bytes_list())

    def bytes_list(self):
        """Each row's bytes as a list (``b''`` for null rows). A list
        comprehension over ``offsets.tolist()``: in the wasm interpreter this
        beats a ``map(slice ...)`` chain by 2x."""
        o = self.offsets.tolist()
        data = self._data_bytes()
        return [data[a:z] for a, z in zip(o, o[1:])]

    def to_bytes_list(self):
        """Each row's bytes, ``None`` for null rows."""
        return self._with_nulls_list(self.bytes_list())

    def to_pylist(self):
        if not self.type.is_string:
            return self.to_bytes_list()
        data = self._data_bytes()
        o = self.offsets
        if not isinstance(o, memoryview):
            o = memoryview(o)
        lo, hi = o[0], o[-1]
        if lo == 0 and hi == len(data):
            whole = data
        else:
            whole = data[lo:hi]
        if whole.isascii():
            # One decode, then str slices (byte offsets = char offsets).
            text = whole.decode("ascii")
            o = self.offsets.tolist()
            if lo:
                o = [x - lo for x in o]
            vals = [text[a:z] for a, z in zip(o, o[1:])]
        else:
            vals = list(map(bytes.decode, self.bytes_list()))
        return self._with_nulls_list(vals)

    def _filter(self, sel):
        validity, nulls = self._filter_validity(sel)
        o = self.offsets
        if not isinstance(o, memoryview):
            o = memoryview(o)
        w = self.type.width
        data = self.data if isinstance(self.data, memoryview) else memoryview(self.data)
        if sel.starts is None:
            ol = o.tolist()
            db = self._data_bytes()
            parts = [db[x:y] for x, y, k in zip(ol, ol[1:], sel.mask) if k]
            return BinaryColumn.from_parts(self.type, parts, validity, nulls)
        starts, ends = sel.starts, sel.ends
        a = list(map(getitem, repeat(o), starts))  # data start of each run
        z = list(map(getitem, repeat(o), ends))  # data end of each run
        new_data = b"".join(map(getitem, repeat(data), map(slice, a, z)))
        # The offsets of run r's rows are o[s+1 .. e] shifted down by
        # a[r] - (bytes kept before run r): gather those lanes, build the
        # matching lanes of shifts, subtract the two as big ints (in C; each
        # lane is >= its shift, so no borrow crosses lanes).
        kept_lanes = b"".join(map(getitem, repeat(o.cast("B")), sel.slices(w, 1)))
        lanes = map(sub, ends, starts)
        shift = map(sub, a, accumulate(map(sub, z, a), initial=0))
        pattern = b"".join(map(mul, map(_LANE_PACK[w], shift), lanes))
        nbytes = len(kept_lanes)
        new_off = bytes(w) + (int.from_bytes(kept_lanes, "little")
                              - int.from_bytes(pattern, "little")).to_bytes(nbytes, "little")
        return BinaryColumn(self.type, memoryview(new_off).cast(self.type.fmt), new_data,
                            validity, nulls)

    def take(self, indices):
        indices = _check_indices(indices, self.length)
        validity, nulls = self._take_validity(indices)
        o = self.offsets.tolist()
        data = self._data_bytes()
        n = self.length
        parts = [data[o[i]:o[i + 1]] if i >= 0 else data[o[i + n]:o[i + n + 1]] for i in indices]
        return BinaryColumn.from_parts(self.type, parts, validity, nulls)

    def slice(self, offset, length):
        offset, length = _clip(offset, length, self.length)
        validity, nulls = self._slice_validity(offset, length)
        o = self.offsets
        if not isinstance(o, memoryview):
            o = memoryview(o)
        col = BinaryColumn(self.type, o[offset:offset + length + 1], self.data, validity, nulls)
        col._bytes = self._bytes
        return col

    def compact(self):
        """(offsets starting at 0, data holding exactly the rows' bytes)."""
        o = self.offsets
        lo, hi = o[0], o[-1]
        if lo == 0:
            return o, (self.data if hi == len(self.data) else memoryview(self.data)[:hi])
        new_off = array(self.type.fmt, map(sub, o, repeat(lo)))
        return new_off, memoryview(self.data)[lo:hi]


def _clip(offset, length, n):
    if offset < 0 or length < 0 or offset + length > n:
        raise IdemError("slice [%d, %d) out of range for %d rows" % (offset, offset + length, n))
    return offset, length


# ---------------------------------------------------------------------------
# building columns from Python values


def column(values, type):
    """A column of ``type`` from a Python sequence; ``None`` is null.

    Numbers go to numeric/temporal types (dates and timestamps as their raw
    integer counts), ``str`` to Utf8, ``bytes`` to Binary, bools to Boolean.
    An ``array.array`` with the right typecode is used without copying.
    ``column(type, values)`` works too."""
    if isinstance(values, T.DataType) and not isinstance(type, T.DataType):
        values, type = type, values
    if not isinstance(type, T.DataType):
        raise TypeError("column(values, type): type must be a DataType such as idem_guest.int64, "
                        "not %r" % (type,))
    kind = type.kind
    if kind == "null":
        return NullColumn(len(values) if hasattr(values, "__len__") else len(list(values)))
    if kind == "prim" and isinstance(values, (array, memoryview)):
        return PrimitiveColumn(type, values)
    if not isinstance(values, (list, tuple)):
        values = list(values)
    n = len(values)
    validity = None
    if None in values:
        v01 = bytes(map(is_not, values, repeat(None)))
        validity = bytes_to_bits(v01)
        nulls = n - _count_ones(v01)
    else:
        nulls = 0
    if kind == "prim":
        if nulls:
            zero = 0.0 if type.is_floating else 0
            values = [zero if v is None else v for v in values]
        return PrimitiveColumn(type, _typed(values, type), validity, nulls)
    if kind == "bool":
        b01 = bytes(map(bool, values))
        return BoolColumn(bytes_to_bits(b01), n, validity, nulls)
    if kind == "bin":
        if nulls:
            empty = "" if type.is_string else b""
            values = [empty if v is None else v for v in values]
        if type.is_string:
            try:
                parts = list(map(str.encode, values))
            except TypeError:
                bad = next(v for v in values if not isinstance(v, str))
                raise IdemError("a %s column takes str values, got %s" % (
                    type, builtins_type(bad).__name__)) from None
        else:
            parts = [bytes(v) for v in values]
        return BinaryColumn.from_parts(type, parts, validity, nulls)
    raise IdemError("cannot build a column of type %s" % type)


def concat_columns(cols):
    """One column holding the rows of ``cols`` (all of one type) in order."""
    cols = list(cols)
    if not cols:
        raise IdemError("concat of no columns")
    ty = cols[0].type
    for c in cols:
        if c.type != ty:
            raise IdemError("concat: column types differ (%s and %s)" % (ty, c.type))
    if len(cols) == 1:
        return cols[0]
    n = sum(c.length for c in cols)
    nulls = sum(c.null_count for c in cols)
    validity = None
    if nulls:
        validity = bytes_to_bits(b"".join(
            b"\x01" * c.length if c.valid01() is None else c.valid01() for c in cols))
    if ty.kind == "null":
        return NullColumn(n)
    if ty.kind == "prim":
        out = array(ty.fmt)
        for c in cols:
            v = c.values
            if isinstance(v, array):
                out.extend(v)
            else:
                out.frombytes(v.cast("B") if v.format != "B" else v)
        return PrimitiveColumn(ty, out, validity, nulls)
    if ty.kind == "bool":
        b01 = b"".join(c.values01() for c in cols)
        return BoolColumn(bytes_to_bits(b01), n, validity, nulls)
    if ty.kind == "bin":
        offs = array(ty.fmt, [0])
        datas = []
        base = 0
        for c in cols:
            o, d = c.compact()
            datas.append(d)
            offs.extend(map(base.__add__, o[1:]) if base else o[1:])
            base += len(d)
        return BinaryColumn(ty, offs, b"".join(datas), validity, nulls)
    raise IdemError("cannot concat %s columns" % ty)
