"""Declared parameters: a transform class may say which params it takes, and
the glue checks ``ctx.params`` against that before ``open`` sees it. Without
a declaration a misspelled param (``min_amont``) would be silently ignored
and the default used; with one it fails the run, naming it. The same checks
and messages as the Rust SDK (guest-sdk/src/params.rs) and the JavaScript
one::

    class CleanOrders(ig.Transform):
        params = [ig.Param("min_amount", float, default=0.0)]

Each entry is an :class:`Param` or a dict with the same keys
(``{"name": "key", "type": "string", "required": True}``).
"""

import json

from .errors import IdemError

__all__ = ["Param", "check_params"]

# Python type -> the JSON type's name errors use.
_TYPES = {float: "number", int: "integer", str: "string", bool: "boolean"}
_NAMES = ("number", "integer", "string", "boolean")
_UNSET = object()


class Param:
    """One declared parameter.

    - ``name``: its key in the params object
    - ``type``: ``float`` (any number), ``int`` (a number with no fraction;
      ``3.0`` is passed on as ``3``), ``str`` or ``bool``; or the names
      ``"number"``, ``"integer"``, ``"string"``, ``"boolean"``
    - ``default``: filled into ``ctx.params`` when it is not given (or null)
    - ``required``: the run fails when it is not given
    - ``doc``: what it means, for people reading the declaration
    """

    __slots__ = ("name", "type", "default", "required", "doc")

    def __init__(self, name, type, default=None, required=False, doc=None):
        self.name = name
        try:
            self.type = _TYPES.get(type, type)
        except TypeError:  # unhashable: refused by name when checked
            self.type = type
        self.default = default
        self.required = bool(required)
        self.doc = doc

    def __repr__(self):
        return "Param(%r, %r, default=%r, required=%r)" % (
            self.name, self.type, self.default, self.required)

    def describe(self):
        """```min_amount` (number, default 0.0)``: how errors list it."""
        s = "`%s` (%s" % (self.name, self.type)
        if self.required:
            s += ", required"
        elif self.default is not None:
            s += ", default %s" % _show_value(self.default)
        return s + ")"


def _as_param(p):
    if isinstance(p, Param):
        return p
    if isinstance(p, dict) and isinstance(p.get("name"), str):
        return Param(p["name"], p.get("type"), p.get("default"), p.get("required", False),
                     p.get("doc"))
    raise IdemError("params: each entry must be an idem_guest.Param or a dict with a "
                    "`name`, got %s" % _show_value(p))


def _declaration(declared):
    """The declaration as a list of Param, checked: known types, names
    unique, defaults of their declared type."""
    if isinstance(declared, (str, dict)) or not hasattr(declared, "__iter__"):
        raise IdemError("params must be a list of idem_guest.Param, got %s" % _show_value(declared))
    out = []
    for p in map(_as_param, declared):
        if p.type not in _NAMES:
            raise IdemError("params: `%s` has type %s; use float, int, str or bool" % (
                _show_name(p.name), _show_value(p.type)))
        if any(q.name == p.name for q in out):
            raise IdemError("params: `%s` is declared twice" % _show_name(p.name))
        if p.default is not None:
            try:
                _typed(p, p.default)
            except IdemError as e:
                raise IdemError("params: the default of %s" % e) from None
        out.append(p)
    return out


def check_params(declared, params):
    """Check ``params`` against ``declared`` and return a new dict with the
    declared defaults filled in: a JSON object (None counts as ``{}``),
    every key declared (else an error naming it, with a did-you-mean),
    every value of its declared type, every required one given (a null
    value counts as not given). The first problem found is raised as an
    :class:`IdemError`."""
    declared = _declaration(declared)
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise IdemError("params must be a JSON object, got %s" % _show_value(params))
    names = {p.name for p in declared}
    # The least unknown key in code point (= UTF-8) order: the same one in
    # every SDK.
    unknown = sorted(k for k in params if k not in names)
    if unknown:
        raise IdemError(_unknown(unknown[0], declared))
    out = dict(params)
    for p in declared:
        v = out.get(p.name)
        if v is not None:
            out[p.name] = _typed(p, v)
        elif p.required:
            raise IdemError("missing required parameter %s" % p.describe())
        elif p.default is not None:
            out[p.name] = _typed(p, p.default)
    return out


def _typed(p, v):
    """``v`` if it has ``p``'s type (an integral float of an integer param
    as an int), else an error naming the param and the type."""
    t = type(v)
    if p.type == "number" and t in (int, float):
        return v
    if p.type == "integer" and (t is int or (t is float and v.is_integer())):
        return int(v)
    if (p.type == "string" and t is str) or (p.type == "boolean" and t is bool):
        return v
    article = "an" if p.type == "integer" else "a"
    raise IdemError("parameter `%s` must be %s %s, got %s (%s)" % (
        _show_name(p.name), article, p.type, _show_value(v), _kind(v)))


def _unknown(key, declared):
    """The error for a key no param declares."""
    best, best_d = None, 3
    for p in declared:
        d = distance(key, p.name)
        if d < best_d:
            best, best_d = p, d
    hint = " (did you mean `%s`?)" % best.name if best is not None else ""
    takes = ", ".join(p.describe() for p in declared) if declared else "no parameters"
    return "unknown parameter `%s`%s: this transform takes %s" % (_show_name(key), hint, takes)


def _kind(v):
    t = type(v)
    if v is None:
        return "null"
    if t is bool:
        return "a boolean"
    if t is int or (t is float and v.is_integer()):
        return "a number"
    if t is float:
        return "a number with a fraction"
    if t is str:
        return "a string"
    if t in (list, tuple):
        return "an array"
    if t is dict:
        return "an object"
    return t.__name__


def _cut(s):
    return s if len(s) <= 100 else s[:100] + "\u2026"


def _show_value(v):
    """``v`` as JSON, cut at 100 characters (params come from the user)."""
    try:
        s = json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        s = repr(v)
    return _cut(s)


def _show_name(n):
    return _cut(json.dumps(str(n), ensure_ascii=False)[1:-1].replace('\\"', '"'))


def distance(a, b):
    """Levenshtein distance of ``a`` and ``b``, or 3 (too far to suggest)
    when their lengths differ by more than 2: keys come from the user and
    may be long, names are short."""
    if abs(len(a) - len(b)) > 2:
        return 3
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a):
        cur = [i + 1]
        for j, cb in enumerate(b):
            cur.append(min(prev[j] + (ca != cb), prev[j + 1] + 1, cur[j] + 1))
        prev = cur
    return prev[len(b)]
