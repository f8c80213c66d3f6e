"""The componentize-py glue: the ``Transform`` and ``SideInputs`` classes
the entry module re-exports. Imported only inside a component build (needs ``wit_world``).

The entry module is::

    from idem_guest._world import Transform, SideInputs   # sandbox guards first
    import app                                  # the user's module

(the other order works too; this one also catches ``from datetime import
datetime`` done by the user's module before it imports idem_guest).
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host

from . import _runtime, _sandbox, log

_LEVELS = (host.Level.DEBUG, host.Level.INFO, host.Level.WARN, host.Level.ERROR)


def _sink(level, message):
    host.log(_LEVELS[level], message)


log._sink = _sink
_sandbox.install()

# componentize-py may build a new instance of the exported class for every
# call: the run's state lives in this module-level runner.
_runner = _runtime.Runner()


def _fail(e):
    try:
        _sandbox.flush_streams()
        log.error(_runtime.format_stack(e))
        msg = _runtime.describe_exception(e)
    except BaseException as e2:  # never let formatting trap
        msg = "%s (and formatting it failed: %s)" % (type(e).__name__, type(e2).__name__)
    return Err(msg)


def _call(fn, *args):
    """Run one export: any exception becomes ``Err(message)`` (an uncaught
    one would print a traceback to the stubbed stderr: a bare trap)."""
    try:
        return fn(*args)
    except Err:
        raise
    except BaseException as e:
        err = _fail(e)
    finally:
        _sandbox.flush_streams()
    raise err


class SideInputs(exports.SideInputs):
    def side_input(self, name, batch):
        return _call(_runner.side_input, name, batch)


class Transform(exports.Transform):
    def open(self, ctx):
        return _call(_runner.open, ctx.slice_id, ctx.logical_date, ctx.params, ctx.input_schema,
                     ctx.batch_rows)

    def push(self, batch):
        return _call(_runner.push, batch)

    def finish(self):
        return _call(_runner.finish)
