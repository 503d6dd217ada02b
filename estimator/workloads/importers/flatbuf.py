"""A bounds-checked reader for FlatBuffers tables (the wire format, not a particular schema).

The ``flatbuffers`` Python runtime trusts its input: a corrupt offset makes it read past the end
of the buffer or loop over a 4-billion-element vector. Imported files are untrusted, so this reader
checks every offset and vector length against the buffer before touching it and raises
:class:`FlatBufferError` (a ``ValueError``) naming the problem. Building (for exports and tests)
uses the ``flatbuffers`` runtime's ``Builder``, see :mod:`.topoopt_schema`.

Wire format used (FlatBuffers spec): little-endian; the buffer starts with a ``uoffset`` (u32) to
the root table; a table starts with a ``soffset`` (i32) back to its vtable; a vtable is
``u16 vtable_bytes, u16 table_bytes, u16 field_offset[...]`` (0 = field absent, use the
default); reference fields hold a ``uoffset`` relative to the field's own position; vectors and
strings are ``u32 length`` followed by the elements.
"""

from __future__ import annotations

import struct

from estimator import limits

_SCALAR = {"bool": "?", "byte": "b", "ubyte": "B", "short": "h", "ushort": "H", "int": "i",
           "uint": "I", "long": "q", "ulong": "Q", "float": "f", "double": "d"}


class FlatBufferError(ValueError):
    """The buffer is not a well-formed FlatBuffer (message says where)."""


class Table:
    """One table inside a buffer, with checked access to fields by slot number (0-based)."""

    __slots__ = ("buf", "pos", "_vt", "_vt_len", "_tab_len", "extent")

    def __init__(self, buf: bytes, pos: int, extent: list[int] | None = None):
        n = len(buf)
        if not 0 <= pos <= n - 4:
            raise FlatBufferError(f"table offset {pos} outside the {n}-byte buffer")
        vt = pos - struct.unpack_from("<i", buf, pos)[0]
        if not 0 <= vt <= n - 4:
            raise FlatBufferError(f"vtable offset {vt} of table at {pos} outside the buffer")
        vt_len, tab_len = struct.unpack_from("<HH", buf, vt)
        if vt_len < 4 or vt_len % 2 or vt + vt_len > n or tab_len < 4 or pos + tab_len > n:
            raise FlatBufferError(f"corrupt vtable at {vt} for table at {pos}")
        self.buf, self.pos, self._vt, self._vt_len, self._tab_len = buf, pos, vt, vt_len, tab_len
        #: shared by every table of one buffer: the end of the furthest byte any read reached,
        #: so :meth:`check_no_trailing` can tell a complete buffer from one with bytes appended
        self.extent = extent if extent is not None else [0]
        self._reach(max(pos + tab_len, vt + vt_len))

    def _reach(self, end: int) -> None:
        if end > self.extent[0]:
            self.extent[0] = end

    def check_no_trailing(self, slack: int = 16) -> None:
        """Refuse a buffer with more than ``slack`` bytes (alignment padding) past everything read."""
        extra = len(self.buf) - self.extent[0]
        if extra > slack:
            raise FlatBufferError(f"{extra} unexpected bytes after the end of the FlatBuffer data "
                                  f"(data ends at byte {self.extent[0]} of {len(self.buf)})")

    @classmethod
    def root(cls, buf: bytes) -> Table:
        if len(buf) < 8:
            raise FlatBufferError(f"only {len(buf)} bytes, too short for a FlatBuffer")
        return cls(buf, struct.unpack_from("<I", buf, 0)[0])

    def _field(self, slot: int, size: int) -> int:
        """Absolute position of a present field (0 when absent)."""
        entry = 4 + 2 * slot
        if entry >= self._vt_len:
            return 0
        off = struct.unpack_from("<H", self.buf, self._vt + entry)[0]
        if off == 0:
            return 0
        if off + size > self._tab_len:
            raise FlatBufferError(f"field {slot} of table at {self.pos} runs past the table")
        return self.pos + off

    def scalar(self, slot: int, kind: str, default: float | int | bool = 0) -> float | int | bool:
        fmt = "<" + _SCALAR[kind]
        at = self._field(slot, struct.calcsize(fmt))
        return struct.unpack_from(fmt, self.buf, at)[0] if at else default

    def _target(self, slot: int) -> int:
        at = self._field(slot, 4)
        if not at:
            return 0
        target = at + struct.unpack_from("<I", self.buf, at)[0]
        if target > len(self.buf) - 4:
            raise FlatBufferError(f"field {slot} of table at {self.pos} points outside the buffer")
        return target

    def _vector(self, slot: int, elem_size: int) -> tuple[int, int]:
        target = self._target(slot)
        if not target:
            return 0, 0
        count = struct.unpack_from("<I", self.buf, target)[0]
        start = target + 4
        if start + count * elem_size > len(self.buf):
            raise FlatBufferError(
                f"vector in field {slot} of table at {self.pos} claims {count} elements, past the buffer end"
            )
        self._reach(start + count * elem_size + (1 if elem_size == 1 else 0))  # strings end with a NUL
        return start, count

    def table(self, slot: int) -> Table | None:
        target = self._target(slot)
        return Table(self.buf, target, self.extent) if target else None

    def tables(self, slot: int) -> list[Table]:
        start, count = self._vector(slot, 4)
        if count > limits.get().graph_nodes:  # checked before a Python object is made per entry
            raise FlatBufferError(f"vector in field {slot} of table at {self.pos} has {count} tables, more than "
                                  f"limits.graph_nodes = {limits.get().graph_nodes}")
        out = []
        for i in range(count):
            at = start + 4 * i
            out.append(Table(self.buf, at + struct.unpack_from("<I", self.buf, at)[0], self.extent))
        return out

    def scalars(self, slot: int, kind: str) -> tuple:
        code = _SCALAR[kind]
        start, count = self._vector(slot, struct.calcsize(code))
        return struct.unpack_from(f"<{count}{code}", self.buf, start) if count else ()

    def string(self, slot: int, default: str = "") -> str:
        start, count = self._vector(slot, 1)
        if not start:
            return default
        try:
            return self.buf[start : start + count].decode("utf-8")
        except UnicodeDecodeError:
            raise FlatBufferError(f"string in field {slot} of table at {self.pos} is not UTF-8") from None
