"""Drive a :class:`~idem_guest.Transform` the way the host does, over IPC
bytes: the part of the component glue that needs no WIT bindings (so native
tests exercise it too). Not a stable API."""

import json
import os

from . import _sandbox, ipc
from .batch import Batch
from .context import Context
from .errors import IdemError
from .params import check_params
from .transform import exported_class

__all__ = ["Runner", "describe_exception", "format_stack"]

# Most side inputs one run gives (as the host and the other SDKs).
MAX_SIDE_INPUTS = 16

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))


def check_columns(columns):
    """The host's checks on a ``columns()`` answer; a list of str or None."""
    if columns is None:
        return None
    if isinstance(columns, str) or not hasattr(columns, "__iter__"):
        raise IdemError("columns() must return a list of column names or None, got %r" % (columns,))
    columns = list(columns)
    for c in columns:
        if not isinstance(c, str):
            raise IdemError("columns() must return column names (str), got %r" % (c,))
    if not columns:
        raise IdemError("columns(): an empty list (declare at least one column, or none for all)")
    seen = set()
    for c in columns:
        if c in seen:
            raise IdemError("columns(): `%s` is declared twice" % c)
        seen.add(c)
    return columns


def declared_params(cls, params):
    """``params`` checked against ``cls.params`` with its defaults filled
    in (before ``open``, so a misspelled or ill-typed param fails the run
    by name instead of being ignored); as given when ``cls`` declares none."""
    declared = getattr(cls, "params", None)
    return params if declared is None else check_params(declared, params)


def encode_output(out, where):
    if out is None:
        return b""
    if isinstance(out, Batch):
        try:
            return ipc.write_stream(out)
        except IdemError as e:
            raise IdemError("output batch: %s" % e) from None
    raise IdemError("%s() must return an idem_guest.Batch or None, not %s" % (where, type(out).__name__))


class Runner:
    """One run: ``open`` once, ``push`` per batch, ``finish`` once. State
    lives here (componentize-py may create a new instance of the exported
    class for every call, so the glue keeps a module-level Runner)."""

    def __init__(self, cls=None):
        self.cls = cls
        self.transform = None
        # Side inputs as they arrive (every batch before ``open``): name ->
        # batches in read order.
        self.sides = {}

    def side_input(self, name, data):
        try:
            self._side_input(name, data)
        except BaseException:
            # A failed run leaves nothing for the next one (a native run's).
            self.sides = {}
            raise

    def _side_input(self, name, data):
        if name not in self.sides and len(self.sides) >= MAX_SIDE_INPUTS:
            raise IdemError("more than %d side inputs (`%s` is one too many)" % (MAX_SIDE_INPUTS, name))
        try:
            schema, batches = ipc.read_stream(bytes(data))
        except IdemError as e:
            raise IdemError("side input `%s`: %s" % (name, e)) from None
        if schema is None:
            raise IdemError("side input `%s`: an empty stream" % name)
        batch = Batch.concat(batches) if batches else Batch.empty(schema)
        got = self.sides.setdefault(name, [])
        if got and got[0].schema.fields != batch.schema.fields:
            raise IdemError("side input `%s`: a batch of another schema than its first" % name)
        got.append(batch)

    def open(self, slice_id, logical_date, params, input_schema, batch_rows):
        _sandbox.activate()  # no-op natively unless installed
        text = params.strip() if isinstance(params, str) else params
        if not text:
            params = {}
        else:
            try:
                params = json.loads(text)
            except ValueError as e:
                raise IdemError("params are not JSON: %s" % e) from None
        try:
            schema = ipc.read_schema(bytes(input_schema))
        except IdemError as e:
            raise IdemError("input schema: %s" % e) from None
        cls = self.cls or exported_class()
        params = declared_params(cls, params)
        ctx = Context(slice_id, logical_date, params, schema, batch_rows, self.sides)
        self.sides = {}
        t = cls()
        self.transform = None
        t.open(ctx)
        columns = check_columns(t.columns())
        self.transform = t
        return columns

    def push(self, data):
        t = self.transform
        if t is None:
            raise IdemError("push before open")
        try:
            batch = ipc.read_batch(data)
        except IdemError as e:
            raise IdemError("input batch: %s" % e) from None
        if batch is None:
            return b""
        return encode_output(t.push(batch), "push")

    def finish(self):
        t = self.transform
        if t is None:
            raise IdemError("finish before open")
        self.transform = None
        return encode_output(t.finish(), "finish")


def _frames(tb):
    out = []
    while tb is not None:
        code = tb.tb_frame.f_code
        out.append((code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    # Drop the glue's own frames at the top (_world -> Runner).
    while len(out) > 1 and _is_glue(out[0][0]):
        out.pop(0)
    return out


def _is_glue(filename):
    base = filename.replace("\\", "/").rsplit("/", 2)[-2:]
    return base in (["idem_guest", "_world.py"], ["idem_guest", "_runtime.py"])


def _is_user(filename):
    f = os.path.abspath(filename) if not filename.startswith("/python/") else filename
    return not (f.startswith(_PKG_DIR + os.sep) or f.startswith(_STDLIB_DIR + os.sep)
                or filename.startswith("/python/") or filename.startswith("<")
                or "/idem_guest/" in filename)


def describe_exception(exc):
    """``Type: message (at app.py:42 in push)`` -- the innermost frame of
    the transform's own code. Read from the traceback object only:
    formatting with ``traceback`` would read source files, which the sandbox
    does not have."""
    frames = _frames(exc.__traceback__)
    user = [f for f in frames if _is_user(f[0])]
    where = ""
    if user:
        fn, line, func = user[-1]
        where = " (at %s:%d in %s)" % (_sandbox.short_path(fn), line, func)
    elif frames and not isinstance(exc, IdemError):
        fn, line, func = frames[-1]
        where = " (at %s:%d in %s)" % (_sandbox.short_path(fn), line, func)
    msg = str(exc)
    if isinstance(exc, IdemError):
        text = msg
    elif isinstance(exc, KeyError) and len(exc.args) == 1:
        text = "KeyError: %r" % (exc.args[0],)
    else:
        text = "%s: %s" % (type(exc).__name__, msg) if msg else type(exc).__name__
    return text + where


def format_stack(exc):
    """A traceback without source lines (repeated frames collapsed), for
    the host log."""
    lines = ["Traceback (most recent call last):"]
    prev, count = None, 0

    def flush():
        if count > 1:
            lines.append("  [previous line repeated %d more times]" % (count - 1))

    for frame in _frames(exc.__traceback__):
        if frame == prev:
            count += 1
            continue
        flush()
        prev, count = frame, 1
        fn, line, func = frame
        lines.append("  %s:%d in %s" % (_sandbox.short_path(fn), line, func))
    flush()
    lines.append("%s: %s" % (type(exc).__name__, exc))
    return "\n".join(lines)
