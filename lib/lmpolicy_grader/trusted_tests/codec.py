"""The safe form in which values cross between the submission's kernel and the trusted tests.

A value becomes a JSON-able header plus a list of raw byte buffers (the Jupyter message's
``buffers``), and only these kinds exist:

- None, bools, ints, floats (as text, so inf and NaN survive JSON), strings;
- lists, tuples and dicts (keys of the scalar kinds) of encodable values;
- numpy arrays and numpy scalars of a numeric or bool dtype, torch tensors (dtype, shape,
  ``requires_grad``, the bytes of their values), a ``torch.Generator``'s state.

``decode`` builds new objects from that description and checks every field against the header
it claims (dtype in a fixed list, shape of non-negative ints, buffer length equal to the shape's),
so a submission can make a value wrong but cannot make decoding run its code: nothing is unpickled,
nothing is looked up by a name the submission chose.
"""
from __future__ import annotations

import math

import numpy as np
import torch

MAX_DEPTH = 32
MAX_ITEMS = 100_000  # containers' elements, in all
MAX_BYTES = 512 * 1024**2

# torch dtypes sent as the bytes of a numpy dtype of the same width (bfloat16 as its raw 16 bits)
_TORCH_DTYPES = {
    "float64": (torch.float64, "<f8"), "float32": (torch.float32, "<f4"), "float16": (torch.float16, "<f2"),
    "bfloat16": (torch.bfloat16, "<i2"), "int64": (torch.int64, "<i8"), "int32": (torch.int32, "<i4"),
    "int16": (torch.int16, "<i2"), "int8": (torch.int8, "|i1"), "uint8": (torch.uint8, "|u1"),
    "bool": (torch.bool, "|b1"), "complex64": (torch.complex64, "<c8"), "complex128": (torch.complex128, "<c16"),
}
_NUMPY_KINDS = "biufc"  # bool, signed, unsigned, float, complex: never object, void or strings


class NotEncodable(TypeError):
    """A value outside the safe form (the message names its type and where it sits)."""


class NotDecodable(ValueError):
    """A message that does not describe a value of the safe form."""


def _numpy_dtype(text) -> np.dtype:
    if not isinstance(text, str) or len(text) > 8:
        raise NotDecodable(f"dtype {text!r:.40} is not a dtype description")
    try:
        dtype = np.dtype(text)
    except TypeError:
        raise NotDecodable(f"dtype {text!r} is not a dtype") from None
    if dtype.kind not in _NUMPY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise NotDecodable(f"dtype {text!r} is not a numeric dtype")
    return dtype


class Encoder:
    """Encodes values into one shared list of buffers (one message may carry several values)."""

    def __init__(self):
        self.buffers: list[bytes] = []
        self.size = 0
        self.items = 0

    def encode_one(self, value, where: str, max_items: int | None = None, max_bytes: int | None = None):
        """``value``'s header; on NotEncodable (or past the limits given) nothing of it stays in the buffers."""
        state = (len(self.buffers), self.size, self.items)
        try:
            header = self.encode(value, where)
            if (max_items is not None and self.items - state[2] > max_items) or \
                    (max_bytes is not None and self.size - state[1] > max_bytes):
                raise NotEncodable(f"{where} is larger than asked for")
            return header
        except NotEncodable:
            del self.buffers[state[0]:]
            self.size, self.items = state[1], state[2]
            raise

    def _buffer(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > MAX_BYTES:
            raise NotEncodable(f"the value holds more than {MAX_BYTES // 1024**2} MB")
        self.buffers.append(data)
        return len(self.buffers) - 1

    def encode(self, value, where: str, depth: int = 0):
        if depth > MAX_DEPTH:
            raise NotEncodable(f"{where} is nested more than {MAX_DEPTH} levels deep")
        self.items += 1
        if self.items > MAX_ITEMS:
            raise NotEncodable(f"the value holds more than {MAX_ITEMS} items")
        kind = type(value)
        if value is None or kind is bool or kind is str:
            return {"t": "atom", "v": value}
        if kind is int:
            return {"t": "int", "v": str(value)}
        if kind is float:
            return {"t": "float", "v": repr(value)}
        if isinstance(value, torch.Tensor):
            return self._tensor(value, where)
        if isinstance(value, torch.Generator):
            if value.device.type != "cpu":
                raise NotEncodable(f"{where} is a generator on {value.device}; only CPU generators cross")
            return {"t": "generator", "b": self._buffer(value.get_state().numpy().tobytes())}
        if isinstance(value, np.ndarray) and kind is np.ndarray:
            return self._array(value, "ndarray", where)
        if isinstance(value, np.generic) and value.dtype.kind in _NUMPY_KINDS:
            return self._array(np.asarray(value), "npscalar", where)
        if kind is list or kind is tuple:
            return {"t": kind.__name__, "v": [self.encode(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]}
        if kind is dict:
            pairs = []
            for key, item in value.items():
                if type(key) not in (str, int, float, bool) and key is not None:
                    raise NotEncodable(f"{where} has a key of type {type(key).__name__}")
                pairs.append([self.encode(key, f"a key of {where}", depth + 1),
                              self.encode(item, f"{where}[{key!r:.20}]", depth + 1)])
            return {"t": "dict", "v": pairs}
        raise NotEncodable(f"{where} is a {kind.__module__}.{kind.__qualname__}, which the grader cannot read: "
                           "return tensors, arrays, numbers, strings, or lists, tuples and dicts of these")

    def _tensor(self, value: torch.Tensor, where: str):
        if value.layout != torch.strided or value.is_quantized or value.is_meta:
            raise NotEncodable(f"{where} is a {value.layout} tensor; only dense tensors cross")
        name = str(value.dtype).removeprefix("torch.")
        if name not in _TORCH_DTYPES:
            raise NotEncodable(f"{where} is a tensor of dtype {value.dtype}")
        data = value.detach().to("cpu").contiguous()
        if data.dtype == torch.bfloat16:
            data = data.view(torch.int16)
        return {"t": "tensor", "dtype": name, "shape": list(value.shape), "grad": bool(value.requires_grad),
                "b": self._buffer(data.numpy().tobytes())}

    def _array(self, value: np.ndarray, tag: str, where: str):
        if value.dtype.kind not in _NUMPY_KINDS or value.dtype.fields is not None:
            raise NotEncodable(f"{where} is an array of dtype {value.dtype}; only numbers and bools cross")
        return {"t": tag, "dtype": value.dtype.str, "shape": list(value.shape),
                "b": self._buffer(np.ascontiguousarray(value).tobytes())}


def encode(value, where: str = "the value") -> tuple[dict, list[bytes]]:
    """(header, buffers) of ``value``; NotEncodable names what is outside the safe form."""
    encoder = Encoder()
    return encoder.encode(value, where), encoder.buffers


class Decoder:
    """Decodes the headers of one message against its buffers."""

    def __init__(self, buffers):
        self.buffers = [bytes(b) for b in buffers]
        self.items = 0

    def _bytes(self, node) -> bytes:
        index = node.get("b")
        if type(index) is not int or not 0 <= index < len(self.buffers):
            raise NotDecodable(f"buffer index {index!r:.20} is not one of the {len(self.buffers)} buffers")
        return self.buffers[index]

    @staticmethod
    def _shape(node) -> tuple[int, ...]:
        shape = node.get("shape")
        if type(shape) is not list or len(shape) > 64 or not all(type(n) is int and n >= 0 for n in shape):
            raise NotDecodable(f"shape {shape!r:.60} is not a list of non-negative ints")
        return tuple(shape)

    def _array(self, node) -> np.ndarray:
        dtype, shape, data = _numpy_dtype(node.get("dtype")), self._shape(node), self._bytes(node)
        if len(data) != math.prod(shape) * dtype.itemsize:
            raise NotDecodable(f"an array of shape {shape} and dtype {dtype} needs "
                               f"{math.prod(shape) * dtype.itemsize} bytes, the message has {len(data)}")
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()

    def decode(self, node, depth: int = 0):
        if depth > MAX_DEPTH:
            raise NotDecodable(f"the value is nested more than {MAX_DEPTH} levels deep")
        self.items += 1
        if self.items > MAX_ITEMS or type(node) is not dict:
            raise NotDecodable("the message is not a value of the safe form")
        tag = node.get("t")
        if tag == "atom":
            value = node.get("v")
            if value is not None and type(value) not in (bool, str):
                raise NotDecodable(f"an atom holds a {type(value).__name__}")
            return value
        if tag in ("int", "float"):
            text = node.get("v")
            if type(text) is not str or len(text) > 4400:
                raise NotDecodable(f"a {tag} is not given as text")
            try:
                return int(text) if tag == "int" else float(text)
            except ValueError:
                raise NotDecodable(f"{text!r:.40} is not a number ({tag})") from None
        if tag in ("list", "tuple"):
            items = node.get("v")
            if type(items) is not list:
                raise NotDecodable(f"a {tag} holds no items")
            decoded = [self.decode(item, depth + 1) for item in items]
            return decoded if tag == "list" else tuple(decoded)
        if tag == "dict":
            pairs = node.get("v")
            if type(pairs) is not list or not all(type(p) is list and len(p) == 2 for p in pairs):
                raise NotDecodable("a dict is not a list of pairs")
            result = {}
            for key, item in pairs:
                key = self.decode(key, depth + 1)
                if type(key) not in (str, int, float, bool) and key is not None:
                    raise NotDecodable(f"a dict key is a {type(key).__name__}")
                result[key] = self.decode(item, depth + 1)
            return result
        if tag == "ndarray":
            return self._array(node)
        if tag == "npscalar":
            array = self._array(node)
            if array.shape != ():
                raise NotDecodable("a numpy scalar has a shape")
            return array[()]
        if tag == "tensor":
            name = node.get("dtype")
            if name not in _TORCH_DTYPES:
                raise NotDecodable(f"tensor dtype {name!r:.40} is not one the channel knows")
            dtype, raw = _TORCH_DTYPES[name]
            array = self._array({**node, "dtype": raw})
            tensor = torch.from_numpy(array)
            if dtype == torch.bfloat16:
                tensor = tensor.view(torch.bfloat16)
            if node.get("grad") is True and (tensor.is_floating_point() or tensor.is_complex()):
                tensor.requires_grad_(True)
            return tensor
        if tag == "generator":
            generator = torch.Generator()
            try:
                generator.set_state(torch.from_numpy(np.frombuffer(self._bytes(node), dtype=np.uint8).copy()))
            except RuntimeError as error:
                raise NotDecodable(f"a generator state is not valid ({error})") from None
            return generator
        raise NotDecodable(f"unknown kind {tag!r:.40}")


def decode(header, buffers) -> object:
    """The value ``header`` and ``buffers`` describe, rebuilt from scratch; NotDecodable if they don't."""
    return Decoder(buffers).decode(header)


def tensors_in(value):
    """The tensors in a value of the safe form, depth first: both sides of a call list the same ones
    in the same order (how a gradient finds its way back through the submission's function)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)
