"""Run a transform natively, without a sandbox: for unit tests, and as the
exact sequence the host drives (``open``, the ``columns()`` checks, one
``push`` per batch in order, ``finish``)."""

from . import ipc
from ._runtime import Runner, check_columns, declared_params
from .batch import Batch
from .context import Context
from .errors import IdemError

__all__ = ["run", "run_ipc", "project"]


def project(batch, names):
    """``batch`` narrowed to ``names`` in that order, as the host does."""
    for n in names:
        if n not in batch.schema:
            raise IdemError("the input has no column `%s`" % n)
    return batch.select(names)


def run(cls, ctx, batches):
    """Run ``cls`` over ``batches`` (Batch objects); returns the outputs
    that have rows. ``ctx.input_schema`` defaults to the first batch's."""
    batches = list(batches)
    if ctx.input_schema is None and batches:
        ctx.input_schema = batches[0].schema
    params = declared_params(cls, ctx.params)
    if params is not ctx.params:
        # The caller's context keeps its params; `open` sees them checked.
        ctx = Context(ctx.slice_id, ctx.logical_date, params, ctx.input_schema, ctx.batch_rows)
    t = cls()
    t.open(ctx)
    columns = check_columns(t.columns())
    out = []
    for b in batches:
        if columns is not None:
            b = project(b, columns)
        o = t.push(b)
        if o is not None and not isinstance(o, Batch):
            raise IdemError("push() must return an idem_guest.Batch or None")
        if o is not None and o.num_rows:
            out.append(o)
    o = t.finish()
    if o is not None and o.num_rows:
        out.append(o)
    return out


def run_ipc(cls, streams, ctx=None, schema_bytes=None):
    """Run ``cls`` through the same byte-level path as the component
    (Arrow IPC in and out, output validation): ``streams`` are IPC streams
    of whole input batches. Returns the output streams (``b""`` = no rows)."""
    ctx = ctx or Context()
    streams = list(streams)
    if schema_bytes is None:
        if not streams:
            raise IdemError("run_ipc: no input and no schema")
        schema_bytes = ipc.write_schema(ipc.read_schema(streams[0]))
    import json
    r = Runner(cls)
    columns = r.open(ctx.slice_id, ctx.logical_date, json.dumps(ctx.params), schema_bytes,
                     ctx.batch_rows)
    outs = []
    for s in streams:
        if columns is not None:
            b = ipc.read_batch(s)
            s = ipc.write_stream(project(b, columns)) if b is not None else s
        outs.append(r.push(s))
    outs.append(r.finish())
    return outs
