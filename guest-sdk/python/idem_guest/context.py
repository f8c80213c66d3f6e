"""The run context handed to ``Transform.open``."""

import json

from .errors import IdemError

__all__ = ["Context"]


def _show(v):
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return repr(v)


class Context:
    """What a transform knows about its run. Everything here is a function
    of the run key: there is no wall clock, only the scheduler's logical date.

    - ``slice_id``: name of the input slice, e.g. ``date=2026-10-01``
    - ``logical_date``: the scheduler's logical date (ISO 8601) or None
    - ``params``: the transform parameters, a ``dict`` (``{}`` when none)
    - ``input_schema``: :class:`~idem_guest.Schema` of the whole input
    - ``batch_rows``: rows per pushed batch (the last may be shorter)
    - ``side_input(name)``: a side input (``--side NAME=TABLE``), whole
    """

    __slots__ = ("slice_id", "logical_date", "params", "input_schema", "batch_rows", "_sides")

    def __init__(self, slice_id="", logical_date=None, params=None, input_schema=None, batch_rows=8192,
                 side_inputs=None):
        self.slice_id = slice_id
        self.logical_date = logical_date
        self.params = {} if params is None else params
        self.input_schema = input_schema
        self.batch_rows = batch_rows
        # name -> list of Batches (read order); a Batch alone is one.
        self._sides = dict(side_inputs or {})

    def side_input_names(self):
        """The names of the side inputs the run gives, sorted."""
        return sorted(self._sides)

    def side_input(self, name):
        """Side input ``name``, whole, as one :class:`~idem_guest.Batch`
        (rows in read order): a dimension to join the slice with. An error
        names the side inputs the run gives when it does not give this one."""
        from .batch import Batch
        got = self._sides.get(name)
        if got is None:
            given = self.side_input_names()
            which = "it gives: " + ", ".join(given) if given else "it gives none"
            raise IdemError("the run gives no side input `%s` (%s): give it with --side %s=TABLE "
                            "(or `from` in a pipeline stage)" % (name, which, name))
        return got if isinstance(got, Batch) else Batch.concat(got)

    def __repr__(self):
        return "Context(slice_id=%r, logical_date=%r, params=%r, batch_rows=%d)" % (
            self.slice_id, self.logical_date, self.params, self.batch_rows)

    def param(self, name, default=None):
        """A parameter as parsed from JSON, or ``default`` when absent/null."""
        v = self.params.get(name) if isinstance(self.params, dict) else None
        return default if v is None else v

    def param_float(self, name, default=None):
        """A numeric parameter as ``float``, or ``default`` when absent or
        null. An error names the parameter when it has another type."""
        v = self.param(name)
        if v is None:
            return default
        if type(v) not in (int, float):
            raise IdemError("parameter `%s` must be a number, got %s" % (name, _show(v)))
        return float(v)

    param_f64 = param_float

    def param_int(self, name, default=None):
        """An integer parameter (``3`` or ``3.0``), or ``default``."""
        v = self.param(name)
        if v is None:
            return default
        if type(v) is float and v.is_integer():
            v = int(v)
        if type(v) is not int:
            raise IdemError("parameter `%s` must be an integer, got %s" % (name, _show(v)))
        return v

    def param_str(self, name, default=None):
        """A string parameter, or ``default``."""
        v = self.param(name)
        if v is None:
            return default
        if not isinstance(v, str):
            raise IdemError("parameter `%s` must be a string, got %s" % (name, _show(v)))
        return v

    def param_bool(self, name, default=None):
        """A boolean parameter, or ``default``."""
        v = self.param(name)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise IdemError("parameter `%s` must be true or false, got %s" % (name, _show(v)))
        return v
