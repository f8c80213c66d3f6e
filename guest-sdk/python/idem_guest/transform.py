"""The Transform base class and ``export``."""

from .errors import IdemError

__all__ = ["Transform", "export", "exported_class"]


class Transform:
    """A data transform. One instance lives for one run: ``open`` once,
    ``push`` for every input batch in a fixed order, ``finish`` once.

    State kept across batches (dedup sets, aggregates) is deterministic
    because batches always arrive in the same order and size. Emit anything
    collected in a dict or set in a defined (sorted) order: ``str`` hashes
    are randomized per build, so set iteration order differs between builds.
    """

    #: The params this transform takes, e.g. ``[Param("min_amount", float,
    #: default=0.0)]`` (see :mod:`idem_guest.params`), or None: any params
    #: object is then passed to ``open`` as given. When declared, the glue
    #: checks ``ctx.params`` before ``open`` (an unknown key, a value of
    #: another type or a missing required one fails the run, naming it) and
    #: fills the defaults in.
    params = None

    def open(self, ctx):
        """Called once before the first batch; read parameters here."""

    def columns(self):
        """The input columns this transform reads, by name, or None (all).
        Asked right after ``open``; batches then hold exactly these columns,
        in this order, and the host decodes nothing else."""
        return None

    def push(self, batch):
        """Transform one input batch; return a Batch or None (no rows)."""
        raise IdemError("%s does not implement push()" % type(self).__name__)

    def finish(self):
        """Called once after the last batch: return buffered rows or
        aggregates as a Batch, or None."""
        return None


_exported = []


def export(cls):
    """Make ``cls`` the component's transform (usable as a decorator)."""
    if not isinstance(cls, type):
        raise TypeError("export() takes a class, got %r" % (cls,))
    if not callable(getattr(cls, "push", None)):
        raise TypeError("export(%s): the class has no push() method" % cls.__name__)
    _exported[:] = [cls]
    return cls


def _subclasses(base):
    out = []
    for c in base.__subclasses__():
        out.append(c)
        out.extend(_subclasses(c))
    return out


def exported_class():
    """The class passed to ``export``, else the single Transform subclass
    defined outside the SDK."""
    if _exported:
        return _exported[0]
    found = [c for c in _subclasses(Transform) if not c.__module__.startswith("idem_guest")]
    leaves = [c for c in found if not any(issubclass(o, c) and o is not c for o in found)]
    if len(leaves) == 1:
        return leaves[0]
    if not leaves:
        raise IdemError("no transform: define a subclass of idem_guest.Transform and call "
                        "idem_guest.export(YourTransform)")
    raise IdemError("several Transform subclasses (%s): say which one with idem_guest.export(...)"
                    % ", ".join(c.__name__ for c in leaves))
