"""Fields and schemas."""

from .errors import IdemError
from .datatypes import DataType

__all__ = ["Field", "Schema"]


class Field:
    """A named, typed column slot. ``nullable`` defaults to True, as in Arrow;
    ``metadata`` is a ``dict`` of str to str (kept through the IPC boundary)."""

    __slots__ = ("name", "type", "nullable", "metadata")

    def __init__(self, name, type, nullable=True, metadata=None):
        if not isinstance(name, str):
            raise TypeError("field name must be a str, got %r" % (name,))
        if not isinstance(type, DataType):
            raise TypeError("field `%s`: type must be a DataType (e.g. idem_guest.int64), got %r"
                            % (name, type))
        self.name = name
        self.type = type
        self.nullable = bool(nullable)
        self.metadata = dict(metadata) if metadata else {}

    def with_name(self, name):
        return Field(name, self.type, self.nullable, self.metadata)

    def with_nullable(self, nullable):
        return Field(self.name, self.type, nullable, self.metadata)

    def _key(self):
        return (self.name, self.type, self.nullable, tuple(sorted(self.metadata.items())))

    def __eq__(self, other):
        return isinstance(other, Field) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return "Field(%r, %s%s)" % (self.name, self.type, "" if self.nullable else ", not null")


class Schema:
    """An ordered list of :class:`Field` (names need not be unique, as in
    Arrow; lookups by name find the first)."""

    __slots__ = ("fields", "metadata", "_index", "_ipc")

    def __init__(self, fields, metadata=None):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Field):
                raise TypeError("Schema takes Field values, got %r" % (f,))
        self.fields = fields
        self.metadata = dict(metadata) if metadata else {}
        index = {}
        for i, f in enumerate(fields):
            index.setdefault(f.name, i)
        self._index = index
        self._ipc = None  # cached encoded schema message

    @property
    def names(self):
        return [f.name for f in self.fields]

    def __len__(self):
        return len(self.fields)

    def __iter__(self):
        return iter(self.fields)

    def __getitem__(self, i):
        if isinstance(i, str):
            return self.field(i)
        return self.fields[i]

    def __contains__(self, name):
        return name in self._index

    def index(self, name):
        """Position of the column ``name``; an error naming it if absent."""
        try:
            return self._index[name]
        except KeyError:
            raise IdemError("no column `%s` (columns: %s)" % (name, ", ".join(self.names))) from None

    def get_index(self, name, default=-1):
        return self._index.get(name, default)

    def field(self, name):
        """The field ``name`` (an error naming it if absent)."""
        return self.fields[self.index(name)]

    def get(self, name):
        """The field ``name`` or None."""
        i = self._index.get(name)
        return None if i is None else self.fields[i]

    def append(self, field):
        """A new schema with ``field`` added at the end."""
        return Schema(self.fields + (field,), self.metadata)

    def set(self, i, field):
        fields = list(self.fields)
        fields[i] = field
        return Schema(fields, self.metadata)

    def select(self, names):
        return Schema([self.field(n) for n in names], self.metadata)

    def require(self, name, type=None):
        """The field ``name``, checked to have ``type``: errors say what is
        wrong (missing column, or which type it has)."""
        f = self.get(name)
        if f is None:
            raise IdemError("input has no `%s` column" % name)
        if type is not None and f.type != type:
            raise IdemError("column `%s` must be %s, the input has %s" % (name, type, f.type))
        return f

    def __eq__(self, other):
        return (isinstance(other, Schema) and self.fields == other.fields
                and self.metadata == other.metadata)

    def __hash__(self):
        return hash(self.fields)

    def __repr__(self):
        return "Schema([%s])" % ", ".join(map(repr, self.fields))
