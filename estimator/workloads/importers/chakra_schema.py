"""Chakra execution-trace schema (MLCommons ``et_def.proto``, package ``ChakraProtoMsg``) built
with protobuf's runtime, plus the varint-length-delimited framing Chakra files use.

``protoc`` is not needed: the message types are described here as a ``FileDescriptorProto`` (field
numbers and types transcribed from the published schema) and loaded into a private descriptor pool
so they never clash with another copy of the schema in the same process. Only the messages an
execution trace needs are declared (``GlobalMetadata``, ``Node``, ``IOInfo``, ``AttributeProto`` and
its list types); fields not declared (e.g. ``Node.storage``) are skipped as unknown fields.

A file is ``varint(len) GlobalMetadata`` followed by ``varint(len) Node`` repeated.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from estimator import limits

F = descriptor_pb2.FieldDescriptorProto
NODE_TYPES = {"INVALID_NODE": 0, "METADATA_NODE": 1, "MEM_LOAD_NODE": 2, "MEM_STORE_NODE": 3,
              "COMP_NODE": 4, "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7,
              "STORAGE_NODE": 8, "BATCH_NODE": 9, "CHECKPOINT_NODE": 10}
COLLECTIVE_TYPES = {"ALL_REDUCE": 0, "REDUCE": 1, "ALL_GATHER": 2, "GATHER": 3, "SCATTER": 4, "BROADCAST": 5,
                    "ALL_TO_ALL": 6, "REDUCE_SCATTER": 7, "REDUCE_SCATTER_BLOCK": 8, "BARRIER": 9}
# AttributeProto's oneof "value": (scalar name, field number, protobuf type); the list variant of
# each scalar is the next field number and a message <Type>List { repeated <type> values = 1; }.
_ATTR_SCALARS = [("double", 3, F.TYPE_DOUBLE), ("float", 5, F.TYPE_FLOAT), ("int32", 7, F.TYPE_INT32),
                 ("int64", 9, F.TYPE_INT64), ("uint32", 11, F.TYPE_UINT32), ("uint64", 13, F.TYPE_UINT64),
                 ("sint32", 15, F.TYPE_SINT32), ("sint64", 17, F.TYPE_SINT64), ("fixed32", 19, F.TYPE_FIXED32),
                 ("fixed64", 21, F.TYPE_FIXED64), ("sfixed32", 23, F.TYPE_SFIXED32),
                 ("sfixed64", 25, F.TYPE_SFIXED64), ("bool", 27, F.TYPE_BOOL), ("string", 29, F.TYPE_STRING),
                 ("bytes", 31, F.TYPE_BYTES)]
PACKAGE = "ChakraProtoMsg"


def _field(msg: Any, name: str, number: int, ftype: int, *, repeated: bool = False, type_name: str = "",
           oneof: int | None = None) -> None:
    f = msg.field.add(name=name, number=number, type=ftype,
                      label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
    if type_name:
        f.type_name = f".{PACKAGE}.{type_name}"
    if oneof is not None:
        f.oneof_index = oneof


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="estimator_chakra_et_def.proto", package=PACKAGE, syntax="proto3")
    attr = fd.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, F.TYPE_STRING)
    _field(attr, "doc_string", 2, F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for scalar, number, ftype in _ATTR_SCALARS:
        list_name = scalar.capitalize() + "List"  # DoubleList, Int64List, Uint64List, ... as published
        lst = fd.message_type.add(name=list_name)
        _field(lst, "values", 1, ftype, repeated=True)
        _field(attr, f"{scalar}_val", number, ftype, oneof=0)
        _field(attr, f"{scalar}_list", number + 1, F.TYPE_MESSAGE, type_name=list_name, oneof=0)
    meta = fd.message_type.add(name="GlobalMetadata")
    _field(meta, "version", 1, F.TYPE_STRING)
    _field(meta, "attr", 2, F.TYPE_MESSAGE, repeated=True, type_name="AttributeProto")
    io = fd.message_type.add(name="IOInfo")
    for number, name in enumerate(("values", "shapes", "types"), start=1):
        _field(io, name, number, F.TYPE_STRING)
    node = fd.message_type.add(name="Node")
    _field(node, "id", 1, F.TYPE_UINT64)
    _field(node, "name", 2, F.TYPE_STRING)
    _field(node, "type", 3, F.TYPE_ENUM, type_name="NodeType")
    _field(node, "ctrl_deps", 4, F.TYPE_UINT64, repeated=True)
    _field(node, "data_deps", 5, F.TYPE_UINT64, repeated=True)
    _field(node, "start_time_micros", 6, F.TYPE_UINT64)
    _field(node, "duration_micros", 7, F.TYPE_UINT64)
    _field(node, "inputs", 8, F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "outputs", 9, F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "attr", 10, F.TYPE_MESSAGE, repeated=True, type_name="AttributeProto")
    for enum_name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COLLECTIVE_TYPES)):
        enum = fd.enum_type.add(name=enum_name)
        for value_name, value in values.items():
            enum.value.add(name=value_name, number=value)
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
AttributeProto = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.AttributeProto"))
GlobalMetadata = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.GlobalMetadata"))
Node = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.Node"))
IOInfo = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.IOInfo"))


class ChakraFormatError(ValueError):
    """The bytes are not a well-framed Chakra trace (message says where)."""


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ChakraFormatError(f"length prefix at byte {pos} runs past the end of the file")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ChakraFormatError(f"length prefix at byte {pos} is longer than 10 bytes")


def write_messages(messages: list[Any]) -> bytes:
    parts = []
    for msg in messages:
        body = msg.SerializeToString()
        parts += [encode_varint(len(body)), body]
    return b"".join(parts)


def read_messages(data: bytes) -> tuple[Any, list[Any]]:
    """Decode ``GlobalMetadata`` then every ``Node``; raise ChakraFormatError on bad framing/bytes."""
    pos, out = 0, []
    cap = limits.get().graph_nodes + 1  # the metadata message and at most limits.graph_nodes nodes
    while pos < len(data):
        if len(out) >= cap:  # checked while decoding: a file of tiny messages cannot fill the memory
            raise ChakraFormatError(f"more than {cap - 1} node messages (limits.graph_nodes)")
        length, body = decode_varint(data, pos)
        if body + length > len(data):
            raise ChakraFormatError(f"message at byte {pos} claims {length} bytes, past the end of the file")
        msg = GlobalMetadata() if not out else Node()
        try:
            msg.ParseFromString(data[body : body + length])
        except DecodeError as exc:
            what = "global metadata" if not out else f"node message #{len(out) - 1}"
            raise ChakraFormatError(f"{what} at byte {pos} does not decode ({exc})") from None
        out.append(msg)
        pos = body + length
    if not out:
        raise ChakraFormatError("empty file (no global metadata)")
    return out[0], out[1:]


def attr_value(attr: Any) -> Any:
    """The Python value of an AttributeProto (lists become Python lists)."""
    which = attr.WhichOneof("value")
    if which is None:
        return None
    value = getattr(attr, which)
    return list(value.values) if which.endswith("_list") else value


def make_attr(name: str, value: Any, kind: str = "") -> Any:
    """An AttributeProto for a bool / int / float / str / list[int] value; ``kind`` forces the
    oneof member (``"uint64"``, ``"int32"``, ...) where a consumer reads one type only."""
    a = AttributeProto(name=name)
    if kind:
        setattr(a, f"{kind}_val", value)
    elif isinstance(value, bool):
        a.bool_val = value
    elif isinstance(value, int):
        a.int64_val = value
    elif isinstance(value, float):
        a.double_val = value
    elif isinstance(value, str):
        a.string_val = value
    elif isinstance(value, list | tuple):
        a.int64_list.SetInParent()  # an empty list is still a set value
        a.int64_list.values.extend(int(v) for v in value)
    else:
        raise TypeError(f"attribute {name}: unsupported value type {type(value).__name__}")
    return a
