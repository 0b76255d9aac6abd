#!/usr/bin/env python3
"""Dequantizes every tensor of a GGUF with gguf-py (an implementation independent of Hearth's) and writes
them to one binary file for tests/kernels/gguf_py_bitwise_test.cpp: per tensor, uint32 name length, the
UTF-8 name, uint64 element count, then the float32 values in file order. Usage:
    gguf_py_dequant.py GGUF_PY_DIR IN.gguf OUT.bin"""
import struct
import sys

import types  # noqa: E402

import numpy as np  # noqa: E402

# Register the package without running gguf/__init__.py, which imports the vocab module and with it
# sentencepiece; the reader and the quants need neither.
package = types.ModuleType("gguf")
package.__path__ = [sys.argv[1] + "/gguf"]
sys.modules["gguf"] = package
from gguf.gguf_reader import GGUFReader  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

reader = GGUFReader(sys.argv[2])
with open(sys.argv[3], "wb") as out:
    for tensor in reader.tensors:
        values = dequantize(tensor.data, tensor.tensor_type)
        if values.dtype != np.float32:
            sys.exit(f"{tensor.name}: gguf-py returned {values.dtype}, not float32")
        values = np.ascontiguousarray(values).reshape(-1)
        name = tensor.name.encode()
        out.write(struct.pack("<I", len(name)) + name + struct.pack("<Q", values.size))
        out.write(values.tobytes())
