"""Turn the sandbox's bare traps into Python errors that say what happened.

componentize-py's ``--stub-wasi`` makes every WASI call (clock, randomness,
files, stdout) a trap: ``unreachable`` with no message. The guards installed
here replace the usual entry points with functions that raise
:class:`SandboxError` naming the call, and route ``print``/``sys.stderr``/
``logging``/``warnings`` to the host log.

Two phases. :func:`install` runs when the SDK is imported, which
componentize-py does at *build* time (its snapshot keeps the patched
functions): guards pass calls through then, so the build's own imports still
work. :func:`activate` runs at the first ``open`` (run time): from then on
the guards raise, imports of modules that were not loaded at build time fail
with ImportError instead of trapping, and ``random`` is reseeded.
"""

import _strptime  # noqa: F401  (datetime.strptime imports it lazily: load it at build time)
import builtins
import datetime as _dt
import io
import os
import random
import sys
import time
import warnings

from . import log as _log

__all__ = ["SandboxError", "install", "activate", "ACTIVE"]

ACTIVE = False
_installed = False


class SandboxError(RuntimeError):
    """Something idem's deterministic sandbox does not provide (a clock,
    OS randomness, files, late imports)."""


def _clock_error(what):
    return SandboxError("the clock is not available in idem's sandbox (%s); "
                        "use ctx.logical_date" % what)


def _guard(orig, error):
    def guarded(*args, **kwargs):
        if ACTIVE:
            raise error()
        return orig(*args, **kwargs)
    guarded.__name__ = getattr(orig, "__name__", "guarded")
    guarded.__qualname__ = guarded.__name__
    guarded.__doc__ = getattr(orig, "__doc__", None)
    guarded.__wrapped__ = orig
    return guarded


def _guard_optional_arg(orig, name, index):
    """Guard a function that reads the clock only when its time argument
    (position ``index``) is omitted or None (localtime, ctime, strftime...)."""
    def guarded(*args, **kwargs):
        if ACTIVE and (len(args) <= index or args[index] is None) and not kwargs:
            raise _clock_error("time.%s() without a time argument" % name)
        return orig(*args, **kwargs)
    guarded.__name__ = name
    guarded.__wrapped__ = orig
    return guarded


_CLOCKS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
           "process_time", "process_time_ns", "thread_time", "thread_time_ns", "clock_gettime",
           "clock_gettime_ns")


def _patch_time():
    for name in _CLOCKS:
        orig = getattr(time, name, None)
        if orig is not None:
            setattr(time, name, _guard(orig, lambda name=name: _clock_error("time.%s()" % name)))
    time.sleep = _guard(time.sleep, lambda: SandboxError(
        "time.sleep() is not available in idem's sandbox (there is no clock to wait on)"))
    for name, index in (("localtime", 0), ("gmtime", 0), ("ctime", 0), ("asctime", 0),
                        ("strftime", 1)):
        setattr(time, name, _guard_optional_arg(getattr(time, name), name, index))


class _DateMeta(type):
    # isinstance/issubclass against the replacement classes accept the
    # originals too (values made by C code, or before the patch).
    def __instancecheck__(cls, obj):
        base = cls.__dict__.get("_idem_base")
        if base is not None:
            return isinstance(obj, base)
        return type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub):
        base = cls.__dict__.get("_idem_base")
        if base is not None:
            return issubclass(sub, base)
        return type.__subclasscheck__(cls, sub)


def _patch_datetime():
    base_date, base_datetime = _dt.date, _dt.datetime
    if isinstance(base_date, _DateMeta):
        return

    class date(base_date, metaclass=_DateMeta):
        __slots__ = ()
        _idem_base = base_date

        @classmethod
        def today(cls):
            if ACTIVE:
                raise _clock_error("datetime.date.today()")
            return super().today()

    class datetime(base_datetime, metaclass=_DateMeta):
        __slots__ = ()
        _idem_base = base_datetime

        @classmethod
        def now(cls, tz=None):
            if ACTIVE:
                raise _clock_error("datetime.datetime.now()")
            return super().now(tz)

        @classmethod
        def utcnow(cls):
            if ACTIVE:
                raise _clock_error("datetime.datetime.utcnow()")
            return super().utcnow()

        @classmethod
        def today(cls):
            if ACTIVE:
                raise _clock_error("datetime.datetime.today()")
            return super().today()

    for cls, name in ((date, "date"), (datetime, "datetime")):
        cls.__module__ = "datetime"
        cls.__qualname__ = name
        cls.__name__ = name
    _dt.date = date
    _dt.datetime = datetime


def _entropy_error():
    return SandboxError("OS randomness is not available in idem's sandbox; use the `random` "
                        "module (reseeded to 0 at every open) or random.Random(seed)")


def _patch_random():
    os.urandom = _guard(os.urandom, _entropy_error)
    if hasattr(random, "_urandom"):
        random._urandom = _guard(random._urandom, _entropy_error)
    if hasattr(os, "getrandom"):
        os.getrandom = _guard(os.getrandom, _entropy_error)
    seed = random.Random.seed

    def guarded_seed(self, a=None, version=2):
        if ACTIVE and a is None:
            raise SandboxError("random.seed() / random.Random() without a seed need OS entropy, "
                               "which idem's sandbox does not have; pass a seed, e.g. "
                               "random.Random(42)")
        return seed(self, a, version)

    guarded_seed.__wrapped__ = seed
    random.Random.seed = guarded_seed
    # random.seed is a method bound to the module's instance at import.
    random.seed = guarded_seed.__get__(random._inst)


def _fs_error(what):
    return lambda: SandboxError("the filesystem is not available in idem's sandbox (%s)" % what)


_OS_FS = ("open", "listdir", "scandir", "stat", "lstat", "getcwd", "mkdir", "makedirs",
          "remove", "unlink", "rename", "replace", "rmdir", "chdir", "access", "walk",
          "system", "popen")


def _patch_files():
    builtins.open = _guard(builtins.open, _fs_error("open()"))
    io.open = builtins.open
    for name in _OS_FS:
        orig = getattr(os, name, None)
        if orig is not None:
            setattr(os, name, _guard(orig, _fs_error("os.%s()" % name)))


class _HostStream(io.TextIOBase):
    """sys.stdout / sys.stderr: whole lines to the host log once active,
    the original stream before (build time)."""

    def __init__(self, orig, level, name):
        self._orig = orig
        self._level = level
        self._name = name
        self._buf = ""

    @property
    def name(self):
        return self._name

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if not ACTIVE:
            if self._orig is not None:
                return self._orig.write(s)
            return len(s)
        self._buf += s
        if "\n" in self._buf or len(self._buf) > 65536:
            *lines, self._buf = self._buf.split("\n")
            for line in lines:
                _log.log(self._level, line)
            if len(self._buf) > 65536:
                _log.log(self._level, self._buf)
                self._buf = ""
        return len(s)

    def flush(self):
        if ACTIVE and self._buf:
            line, self._buf = self._buf, ""
            _log.log(self._level, line)
        elif not ACTIVE and self._orig is not None:
            try:
                self._orig.flush()
            except Exception:
                pass

    def fileno(self):
        raise io.UnsupportedOperation("no file descriptor in idem's sandbox")


def _patch_streams():
    if isinstance(sys.stdout, _HostStream):
        return
    sys.stdout = _HostStream(sys.stdout, _log.INFO, "<stdout>")
    sys.stderr = _HostStream(sys.stderr, _log.WARN, "<stderr>")
    sys.__stdout__ = sys.stdout
    sys.__stderr__ = sys.stderr


def flush_streams():
    for s in (sys.stdout, sys.stderr):
        if isinstance(s, _HostStream):
            s.flush()


def _showwarning(message, category, filename, lineno, file=None, line=None):
    _log.log(_log.WARN, "%s:%s: %s: %s" % (short_path(filename), lineno, category.__name__, message))


class _NoLateImports:
    """A meta path finder placed before the file system finders once active:
    a module not imported at build time cannot be loaded (no files), so say
    so with ImportError rather than trap."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if ACTIVE:
            raise ModuleNotFoundError(
                "module `%s` was not imported when the component was built, and idem's sandbox "
                "has no filesystem to load it from now: import it at the top of your module"
                % name, name=name)
        return None

    @staticmethod
    def invalidate_caches():
        pass


class _FrozenClock:
    """``time`` as seen by the logging module once active: record
    timestamps are 0 (the host stamps its log lines)."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def time():
        return 0.0

    @staticmethod
    def time_ns():
        return 0

    @staticmethod
    def perf_counter():
        return 0.0

    @staticmethod
    def perf_counter_ns():
        return 0


def _patch_late_modules():
    """Modules the user may have imported at build time, patched at the
    first open (once we know which are loaded)."""
    lc = sys.modules.get("linecache")
    if lc is not None:
        # Source lines would be read from files: tracebacks go without them.
        lc.checkcache = lambda filename=None: None
        lc.updatecache = lambda filename, module_globals=None: []
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.time = _FrozenClock()
        root = logging.getLogger()
        if not root.handlers:
            root.addHandler(_log_handler(logging))


def _log_handler(logging):
    class HostHandler(logging.Handler):
        def emit(self, record):
            try:
                msg = self.format(record)
                lvl = record.levelno
                level = (_log.ERROR if lvl >= logging.ERROR else _log.WARN if lvl >= logging.WARNING
                         else _log.INFO if lvl >= logging.INFO else _log.DEBUG)
                _log.log(level, msg)
            except Exception:
                self.handleError(record)

    h = HostHandler()
    h.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    return h


def short_path(filename):
    """A frame's file name without the component's mount prefix
    (``/1/app.py`` -> ``app.py``, ``/python/lib/python3.14/json/x.py`` -> ``json/x.py``)."""
    f = filename or "?"
    if f.startswith("/"):
        parts = f.split("/")
        if len(parts) > 2 and parts[1].isdigit():
            return "/".join(parts[2:])
        if f.startswith("/python/lib/") and len(parts) > 4:
            return "/".join(parts[4:])
    return f


def install():
    """Patch the modules (build time); the guards stay inert until activate()."""
    global _installed
    if _installed:
        return
    _installed = True
    _patch_time()
    _patch_datetime()
    _patch_random()
    _patch_files()
    _patch_streams()
    warnings.showwarning = _showwarning
    pw = sys.modules.get("_py_warnings")
    if pw is not None:
        pw.showwarning = _showwarning


def activate():
    """Arm the guards (run time, at every open: idempotent) and reseed
    ``random`` so a transform using it gets the same values on every run."""
    global ACTIVE
    if _installed and not ACTIVE:
        ACTIVE = True
        _patch_late_modules()
        if _NoLateImports not in sys.meta_path:
            # After the finders that need no files (builtin, frozen modules).
            at = 0
            for i, f in enumerate(sys.meta_path):
                if getattr(f, "__name__", "") in ("BuiltinImporter", "FrozenImporter"):
                    at = i + 1
            sys.meta_path.insert(at, _NoLateImports)
    random.seed(0)
