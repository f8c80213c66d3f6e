"""Arrow data types the Python SDK reads and writes.

A :class:`DataType` is an immutable value: compare with ``==``. The module
level constants (``int64``, ``float64``, ``utf8``, ...) and the
:func:`timestamp` constructor cover every supported type. Types the SDK cannot
decode (lists, structs, decimals, ...) still appear in schemas (the input
schema describes every input column), with ``supported`` false; a batch holding
such a column is refused, naming it.
"""

__all__ = [
    "DataType", "null", "bool_", "boolean", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "float32", "float64", "utf8",
    "large_utf8", "binary", "large_binary", "date32", "date64", "timestamp",
    "time32", "time64", "duration", "TIME_UNITS",
]

#: Time units, as Arrow's flatbuffer enum orders them.
TIME_UNITS = ("s", "ms", "us", "ns")
_UNIT_NAMES = {"s": "Second", "ms": "Millisecond", "us": "Microsecond", "ns": "Nanosecond"}

# kind: "null", "bool", "prim" (fixed-width values), "bin" (offsets + data).
# fmt: the array/memoryview typecode of the values (prim) or offsets (bin).


class DataType:
    """An Arrow type. ``name`` is arrow-rs's name (``Int64``, ``Utf8``,
    ``Timestamp``...); ``unit``/``tz`` are set for temporal types."""

    __slots__ = ("name", "kind", "fmt", "width", "unit", "tz", "supported", "_key")

    def __init__(self, name, kind, fmt=None, width=0, unit=None, tz=None, supported=True):
        self.name = name
        self.kind = kind
        self.fmt = fmt
        self.width = width
        self.unit = unit
        self.tz = tz
        self.supported = supported
        self._key = (name, unit, tz)

    def __eq__(self, other):
        return isinstance(other, DataType) and self._key == other._key

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        return str(self)

    def __str__(self):
        if self.name == "Timestamp":
            tz = "None" if self.tz is None else 'Some("%s")' % self.tz
            return "Timestamp(%s, %s)" % (_UNIT_NAMES[self.unit], tz)
        if self.name in ("Time32", "Time64", "Duration"):
            return "%s(%s)" % (self.name, _UNIT_NAMES[self.unit])
        return self.name

    @property
    def is_string(self):
        """Utf8 or LargeUtf8."""
        return self.name in ("Utf8", "LargeUtf8")

    @property
    def is_binary_like(self):
        """Utf8, LargeUtf8, Binary or LargeBinary (offsets + data)."""
        return self.kind == "bin"

    @property
    def is_integer(self):
        return self.kind == "prim" and self.fmt in "bhiqBHIQ" and self.name.startswith(("Int", "UInt"))

    @property
    def is_floating(self):
        return self.name in ("Float32", "Float64")

    @property
    def is_numeric(self):
        return self.is_integer or self.is_floating


null = DataType("Null", "null")
boolean = DataType("Boolean", "bool")
bool_ = boolean
int8 = DataType("Int8", "prim", "b", 1)
int16 = DataType("Int16", "prim", "h", 2)
int32 = DataType("Int32", "prim", "i", 4)
int64 = DataType("Int64", "prim", "q", 8)
uint8 = DataType("UInt8", "prim", "B", 1)
uint16 = DataType("UInt16", "prim", "H", 2)
uint32 = DataType("UInt32", "prim", "I", 4)
uint64 = DataType("UInt64", "prim", "Q", 8)
float32 = DataType("Float32", "prim", "f", 4)
float64 = DataType("Float64", "prim", "d", 8)
utf8 = DataType("Utf8", "bin", "i", 4)
large_utf8 = DataType("LargeUtf8", "bin", "q", 8)
binary = DataType("Binary", "bin", "i", 4)
large_binary = DataType("LargeBinary", "bin", "q", 8)
date32 = DataType("Date32", "prim", "i", 4)
date64 = DataType("Date64", "prim", "q", 8)

_INTS = {(8, True): int8, (16, True): int16, (32, True): int32, (64, True): int64,
         (8, False): uint8, (16, False): uint16, (32, False): uint32, (64, False): uint64}


def _unit(unit):
    if unit not in TIME_UNITS:
        raise ValueError("time unit must be one of %s, not %r" % (", ".join(TIME_UNITS), unit))
    return unit


def timestamp(unit="us", tz=None):
    """Timestamp(unit, tz): int64 counts of ``unit`` since the Unix epoch."""
    if tz is not None and not isinstance(tz, str):
        raise TypeError("timestamp tz must be a string or None")
    return DataType("Timestamp", "prim", "q", 8, _unit(unit), tz)


def time32(unit="ms"):
    """Time32(s|ms): int32 time of day."""
    if unit not in ("s", "ms"):
        raise ValueError("Time32 takes unit s or ms")
    return DataType("Time32", "prim", "i", 4, unit)


def time64(unit="us"):
    """Time64(us|ns): int64 time of day."""
    if unit not in ("us", "ns"):
        raise ValueError("Time64 takes unit us or ns")
    return DataType("Time64", "prim", "q", 8, unit)


def duration(unit="us"):
    """Duration(unit): int64."""
    return DataType("Duration", "prim", "q", 8, _unit(unit))


def unsupported(name):
    """A type that schemas may mention but batches cannot carry."""
    return DataType(name, "unsupported", supported=False)
