"""Kernels over columns: comparisons to masks, null masks, derived columns.

Masks are ``bytes`` holding one 0/1 byte per row; null rows are 0 (as an
Arrow filter drops rows whose predicate is null). Feed them to
``Batch.filter`` / ``Column.filter`` or combine them with ``mask_and``,
``mask_or``, ``mask_not``.
"""

import operator
from collections import deque

try:  # Counter.update's C loop; works on a plain dict
    from collections import _count_elements
except ImportError:  # pragma: no cover
    _count_elements = None
from itertools import compress, repeat

from .column import (BinaryColumn, BoolColumn, Column, PrimitiveColumn, _pack, bytes_to_bits,
                     column, mask_and, mask_not, mask_or)
from .errors import IdemError

__all__ = ["compare", "eq", "ne", "lt", "le", "gt", "ge", "is_null", "is_valid", "isin",
           "derive", "fill_null", "mask_and", "mask_or", "mask_not", "count", "sum_by_key",
           "count_by_key"]

# x OP s  ==  s SWAPPED_OP x
_SWAPPED = {"eq": operator.eq, "ne": operator.ne, "lt": operator.gt, "le": operator.ge,
            "gt": operator.lt, "ge": operator.le}
_OPS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
        "gt": operator.gt, "ge": operator.ge}


def _row_values(col):
    """Per-row Python values of a column (null slots unspecified)."""
    if isinstance(col, PrimitiveColumn):
        return col.values
    if isinstance(col, BoolColumn):
        return list(map(bool, col.values01()))
    if isinstance(col, BinaryColumn):
        return col.bytes_list() if not col.type.is_string else col.to_pylist()
    return [None] * col.length


def compare(col, op, scalar):
    """Mask of rows where ``col OP scalar`` (op: eq ne lt le gt ge); null
    rows are 0. Strings compare by UTF-8 bytes (code point order)."""
    if op not in _OPS:
        raise IdemError("compare: op must be one of %s, not %r" % (", ".join(_OPS), op))
    if scalar is None:
        raise IdemError("compare with None: use is_null(col) / is_valid(col)")
    ty = col.type
    # operator functions over map() run in C (a bound method such as
    # ``scalar.__le__`` goes through a slower wrapper).
    if isinstance(col, PrimitiveColumn):
        if not isinstance(scalar, (int, float)) or isinstance(scalar, bool):
            raise IdemError("compare %s column with %r" % (ty, scalar))
        m = bytearray(map(_SWAPPED[op], repeat(scalar), col.values))
    elif isinstance(col, BinaryColumn):
        if isinstance(scalar, str):
            scalar = scalar.encode("utf-8")
        if not isinstance(scalar, (bytes, bytearray)):
            raise IdemError("compare %s column with %r" % (ty, scalar))
        m = bytearray(map(_SWAPPED[op], repeat(bytes(scalar)), col.bytes_list()))
    elif isinstance(col, BoolColumn):
        m = bytearray(map(_OPS[op], map(bool, col.values01()), repeat(bool(scalar))))
    else:
        return bytes(col.length)
    return mask_and(bytes(m), col.valid01())


def eq(col, scalar):
    return compare(col, "eq", scalar)


def ne(col, scalar):
    return compare(col, "ne", scalar)


def lt(col, scalar):
    return compare(col, "lt", scalar)


def le(col, scalar):
    return compare(col, "le", scalar)


def gt(col, scalar):
    return compare(col, "gt", scalar)


def ge(col, scalar):
    return compare(col, "ge", scalar)


def is_valid(col):
    """Mask of non-null rows."""
    v = col.valid01()
    return b"\x01" * col.length if v is None else v


def is_null(col):
    """Mask of null rows."""
    return mask_not(is_valid(col))


def isin(col, values):
    """Mask of rows whose value is in ``values`` (strings compared as str)."""
    if isinstance(col, BinaryColumn):
        keys = {v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values}
        m = bytes(map(keys.__contains__, col.bytes_list()))
    else:
        keys = set(values)
        m = bytes(map(keys.__contains__, _row_values(col)))
    return mask_and(m, col.valid01())


def count(mask):
    """Rows selected by a 0/1 mask."""
    return len(mask) - mask.count(0)


def derive(type, fn, *cols):
    """A new column of ``type`` with ``fn(a[i], b[i], ...)`` for every row
    where all inputs are non-null (null otherwise), e.g.
    ``derive(float64, operator.mul, amount, quantity)``. Numeric inputs are
    passed as int/float, strings as str, binaries as bytes, bools as bool.
    With no nulls the whole column is one C-level ``map``."""
    if not cols:
        raise IdemError("derive needs at least one input column")
    n = cols[0].length
    for c in cols:
        if not isinstance(c, Column):
            raise IdemError("derive: inputs must be columns, got %s" % type(c).__name__)
        if c.length != n:
            raise IdemError("derive: columns of different lengths (%d and %d)" % (n, c.length))
    valid = None
    for c in cols:
        valid = mask_and(valid, c.valid01())
    values = [_row_values(c) for c in cols]
    if valid is None or valid.count(0) == 0:
        if type.kind == "prim":
            try:
                return PrimitiveColumn(type, _pack(type.fmt, list(map(fn, *values))))
            except (TypeError, OverflowError) as e:
                raise IdemError("derive: results do not fit %s: %s" % (type, e)) from None
        return column(list(map(fn, *values)), type)
    it = map(fn, *[compress(v, valid) for v in values])
    if type.kind == "prim":
        zero = 0.0 if type.is_floating else 0
        filled = [next(it) if ok else zero for ok in valid]
        return PrimitiveColumn(type, _pack(type.fmt, filled), bytes_to_bits(valid))
    return column([next(it) if ok else None for ok in valid], type)


def fill_null(col, value):
    """``col`` with null rows replaced by ``value``."""
    v = col.valid01()
    if v is None:
        return col
    vals = col.to_pylist()
    return column([value if x is None else x for x in vals], col.type)


def sum_by_key(acc, keys, values, start=-0.0):
    """``acc[k] = acc.get(k, start) + v`` for every ``(k, v)`` pair, in row
    order, with the loop in C (a chain of ``map``; no Python bytecode per
    row). Row order matters for floats: this adds exactly as a sequential
    Rust loop does. The default ``start`` is -0.0, the additive identity,
    so a group's first value is kept as is (0.0 + -0.0 would be 0.0).
    ``keys`` must be a sequence (it is read twice), e.g. the
    ``bytes_list()`` of a string column. Returns ``acc``."""
    if not isinstance(keys, (list, tuple)):
        keys = list(keys)
    get = acc.get
    deque(map(operator.setitem, repeat(acc), keys,
              map(operator.add, map(get, keys, repeat(start)), values)), 0)
    return acc


def count_by_key(acc, keys):
    """``acc[k] += 1`` for every key (``acc`` a dict or Counter). Returns ``acc``."""
    if _count_elements is not None:
        _count_elements(acc, keys)
        return acc
    get = acc.get
    for k in keys:
        acc[k] = get(k, 0) + 1
    return acc
