"""idem-guest for Python: write an idem transform over Arrow record batches
in pure Python, then build it into a WebAssembly component with
componentize-py.

    import idem_guest as ig

    class Passthrough(ig.Transform):
        def push(self, batch):
            return batch

    ig.export(Passthrough)
"""

import sys

from . import compute, ipc, log
from ._sandbox import SandboxError
from .batch import Batch
from .column import (BinaryColumn, BoolColumn, Column, NullColumn, PrimitiveColumn, as_mask,
                     bits_to_bytes, bytes_to_bits, column, concat_columns, mask_and, mask_not,
                     mask_or)
from .context import Context
from .errors import IdemError
from .params import Param
from .schema import Field, Schema
from .transform import Transform, export
from .datatypes import (DataType, binary, boolean, bool_, date32, date64, duration, float32, float64,
                    int8, int16, int32, int64, large_binary, large_utf8, null, time32, time64,
                    timestamp, uint8, uint16, uint32, uint64, utf8)

__version__ = "0.2.0"

__all__ = [
    "Transform", "export", "Context", "Param", "Batch", "Schema", "Field", "Column", "NullColumn",
    "BoolColumn", "PrimitiveColumn", "BinaryColumn", "column", "concat_columns", "as_mask",
    "mask_and", "mask_or", "mask_not", "bits_to_bytes", "bytes_to_bits", "IdemError",
    "SandboxError", "DataType", "null", "boolean", "bool_", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "float32", "float64", "utf8", "large_utf8", "binary",
    "large_binary", "date32", "date64", "timestamp", "time32", "time64", "duration", "compute",
    "ipc", "log",
]

if sys.platform == "wasi":
    # Inside a component build: guard clocks, randomness, files and stdout
    # before the user's module imports more (see _sandbox).
    from . import _sandbox as _sb

    _sb.install()
    del _sb
