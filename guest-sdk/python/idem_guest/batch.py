"""Record batches: a schema and one column per field, all of one length."""

from .column import (BinaryColumn, Column, Selection,
                     column, concat_columns, _check_indices)
from .errors import IdemError
from .schema import Field, Schema

__all__ = ["Batch"]


class Batch:
    """A record batch. ``batch.column("amount")`` (or ``batch["amount"]``)
    gives a :class:`~idem_guest.column.Column`; ``filter``, ``take``,
    ``select``, ``with_column`` and ``slice`` return new batches that share
    unchanged columns (nothing is copied that need not be)."""

    __slots__ = ("schema", "columns", "num_rows")

    def __init__(self, schema, columns, num_rows=None):
        if not isinstance(schema, Schema):
            schema = Schema(schema)
        columns = list(columns)
        if len(columns) != len(schema.fields):
            raise IdemError("batch has %d columns for a schema of %d fields"
                            % (len(columns), len(schema.fields)))
        if num_rows is None:
            num_rows = columns[0].length if columns else 0
        for f, c in zip(schema.fields, columns):
            if not isinstance(c, Column):
                raise IdemError("column `%s` is a %s, not a Column (build one with "
                                "idem_guest.column(values, type))" % (f.name, type(c).__name__))
            if c.type != f.type:
                raise IdemError("column `%s` holds %s but its field says %s" % (f.name, c.type, f.type))
            if c.length != num_rows:
                raise IdemError("column `%s` has %d rows, the batch %d" % (f.name, c.length, num_rows))
        self.schema = schema
        self.columns = columns
        self.num_rows = num_rows

    # -- construction -------------------------------------------------------

    @classmethod
    def empty(cls, schema):
        """A batch with no rows (and ``schema``): what a transform returns
        when nothing passed but the output's schema must still be known."""
        return cls(schema, [column([], f.type) for f in schema.fields], 0)

    @classmethod
    def from_pydict(cls, data, schema):
        """A batch from ``{name: values}`` following ``schema`` (a
        :class:`Schema` or a list of :class:`Field`). Values may be Python
        sequences (``None`` = null) or ready-made columns."""
        if not isinstance(schema, Schema):
            schema = Schema(schema)
        missing = [f.name for f in schema.fields if f.name not in data]
        if missing:
            raise IdemError("from_pydict: no values for %s" % ", ".join("`%s`" % m for m in missing))
        cols = []
        for f in schema.fields:
            v = data[f.name]
            cols.append(v if isinstance(v, Column) else column(v, f.type))
        n = cols[0].length if cols else 0
        return cls(schema, cols, n)

    @classmethod
    def concat(cls, batches):
        """One batch with the rows of ``batches`` (same schema) in order."""
        batches = list(batches)
        if not batches:
            raise IdemError("concat of no batches")
        schema = batches[0].schema
        for b in batches[1:]:
            if b.schema.fields != schema.fields:
                raise IdemError("concat: batches have different schemas")
        if len(batches) == 1:
            return batches[0]
        cols = [concat_columns([b.columns[i] for b in batches]) for i in range(len(schema.fields))]
        return cls(schema, cols, sum(b.num_rows for b in batches))

    # -- access --------------------------------------------------------------

    def __len__(self):
        return self.num_rows

    @property
    def num_columns(self):
        return len(self.columns)

    @property
    def column_names(self):
        return self.schema.names

    def column(self, key):
        """The column named ``key`` (or at position ``key``); errors name the
        missing column."""
        if isinstance(key, int):
            return self.columns[key]
        return self.columns[self.schema.index(key)]

    __getitem__ = column

    def __contains__(self, name):
        return name in self.schema

    def field(self, name):
        return self.schema.field(name)

    def to_pydict(self):
        return {f.name: c.to_pylist() for f, c in zip(self.schema.fields, self.columns)}

    def to_pylist(self):
        """Rows as dicts (slow: for tests and small outputs)."""
        names = self.schema.names
        cols = [c.to_pylist() for c in self.columns]
        return [dict(zip(names, row)) for row in zip(*cols)] if cols else [{}] * self.num_rows

    def __repr__(self):
        return "<Batch %d rows: %s>" % (
            self.num_rows, ", ".join("%s %s" % (f.name, f.type) for f in self.schema.fields))

    def __eq__(self, other):
        return (isinstance(other, Batch) and self.schema == other.schema
                and self.num_rows == other.num_rows
                and all(a == b for a, b in zip(self.columns, other.columns)))

    __hash__ = None

    # -- derivation ------------------------------------------------------------

    def with_column(self, field, col):
        """A batch with ``col`` added at the end, or replacing the column of
        the same name. ``field`` is a :class:`Field` or a name (then the type
        comes from the column and the field is nullable)."""
        if isinstance(field, str):
            field = Field(field, col.type, True)
        if not isinstance(col, Column):
            col = column(col, field.type)
        i = self.schema.get_index(field.name)
        if i < 0:
            schema = self.schema.append(field)
            cols = self.columns + [col]
        else:
            schema = self.schema.set(i, field)
            cols = list(self.columns)
            cols[i] = col
        return Batch(schema, cols, self.num_rows if self.columns else col.length)

    def with_schema(self, schema):
        """The same columns under another schema (names, nullability,
        metadata); types must match."""
        return Batch(schema, self.columns, self.num_rows)

    def select(self, names):
        """A batch with just these columns, in this order."""
        idx = [self.schema.index(n) for n in names]
        return Batch(Schema([self.schema.fields[i] for i in idx], self.schema.metadata),
                     [self.columns[i] for i in idx], self.num_rows)

    def drop(self, names):
        names = set(names)
        keep = [f.name for f in self.schema.fields if f.name not in names]
        return self.select(keep)

    def filter(self, mask):
        """Rows where ``mask`` is true: 0/1 bytes, a Boolean column (null =
        drop) or an iterable of truthy values; see :func:`idem_guest.as_mask`."""
        sel = Selection(mask, self.num_rows)
        if sel.kept == self.num_rows:
            return self
        return Batch(self.schema, [c._filter(sel) for c in self.columns], sel.kept)

    def take(self, indices):
        """Rows at ``indices`` (any order, repeats allowed)."""
        indices = _check_indices(indices, self.num_rows)
        return Batch(self.schema, [c.take(indices) for c in self.columns], len(indices))

    def slice(self, offset, length=None):
        """Rows ``offset .. offset+length`` (zero copy where possible)."""
        if length is None:
            length = self.num_rows - offset
        return Batch(self.schema, [c.slice(offset, length) for c in self.columns], length)

    def sort_by(self, name, reverse=False):
        """Rows ordered by one column (nulls last; stable). Strings sort by
        UTF-8 bytes, i.e. code point order, as Rust does."""
        col = self.column(name)
        if isinstance(col, BinaryColumn):
            keys = col.to_bytes_list()
        else:
            keys = col.to_pylist()
        present = [i for i, k in enumerate(keys) if k is not None]
        nulls = [i for i, k in enumerate(keys) if k is None]
        present.sort(key=keys.__getitem__, reverse=reverse)
        return self.take(present + nulls)
