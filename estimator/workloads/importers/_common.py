"""Helpers every importer shares: reading files, building node lists, one-line errors.

Importers turn a foreign trace into a :class:`~estimator.workloads.graph.Workload`. They raise
:class:`BadInput` (or :class:`~estimator.errors.EstimatorError`) for anything wrong with the file;
:func:`estimator.workloads.importers.import_file` prefixes the file name so every message reads
``<file>: <problem>`` on one line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from estimator import limits
from estimator.errors import EstimatorError
from estimator.files import excerpt, read_input
from estimator.files import parse_json as strict_json
from estimator.workloads.graph import Node, Workload

#: Bytes per element of the dtype names the trace formats use (lower-cased, prefixes stripped).
DTYPE_BYTES = {
    "float": 4, "float32": 4, "f32": 4, "fp32": 4, "float16": 2, "half": 2, "f16": 2, "fp16": 2,
    "bfloat16": 2, "bf16": 2, "double": 8, "float64": 8, "f64": 8, "int8": 1, "uint8": 1,
    "char": 1, "byte": 1, "bool": 1, "int16": 2, "short": 2, "int32": 4, "int": 4, "uint32": 4,
    "int64": 8, "long": 8, "uint64": 8, "float8": 1, "fp8": 1,
}




class BadInput(EstimatorError):
    """A problem with the input file (the file name is added by ``import_file``)."""


def check_scale(devices: int, nodes: int, what: str) -> None:
    """Refuse graphs beyond ``limits.devices`` devices or ``limits.graph_nodes`` nodes (before
    building them), so a corrupt count (a world size of 10**20) cannot exhaust memory."""
    lim = limits.get()
    if devices > lim.devices:
        raise BadInput(f"{what}: {devices} devices exceeds the limit of {lim.devices} (limits.devices)")
    if nodes > lim.graph_nodes:
        raise BadInput(f"{what}: would create {nodes} nodes, more than the limit of {lim.graph_nodes} (limits.graph_nodes)")


def dtype_bytes(name: str, where: str) -> int:
    """Element size of a dtype named like ``float32``, ``HOROVOD_FLOAT16``, ``c10::Half``."""
    key = re.sub(r"^(horovod_|c10::|torch\.|nccl)", "", str(name).strip().lower())
    if key not in DTYPE_BYTES:
        raise BadInput(f"{where}: unknown dtype {name!r}")
    return DTYPE_BYTES[key]


def read_bytes(path: Path) -> bytes:
    """The file's bytes: regular files only, size-checked before reading (``limits.input_mb``)."""
    return read_input(path, "trace")


def parse_json(data: bytes, what: str) -> Any:
    """Decode a JSON document strictly (UTF-8; no NaN/Infinity or 64-bit-overflowing numbers,
    the field named); ``what`` names the format in the error message."""
    try:
        return strict_json(data, None, f"{what} file")
    except EstimatorError as exc:
        raise BadInput(str(exc)) from None


def number(value: Any, where: str, *, minimum: float = 0.0, integer: bool = False) -> float:
    """A finite number >= ``minimum`` (bools and strings rejected)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadInput(f"{where}: expected a number, got {excerpt(value)}")
    if not math.isfinite(value) or value < minimum:
        raise BadInput(f"{where}: must be a finite number >= {minimum:g}, got {value!r}")
    if integer and int(value) != value:
        raise BadInput(f"{where}: must be an integer, got {value!r}")
    return int(value) if integer else float(value)


def scalar_key(value: Any, where: str) -> Any:
    """An id used as a dictionary key: a string, number or null (never a list/object)."""
    if value is not None and not isinstance(value, str | int | float):
        raise BadInput(f"{where}: expected a number or string id, got {type(value).__name__}")
    return value


def mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadInput(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def sequence(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise BadInput(f"{where}: expected a JSON list, got {type(value).__name__}")
    return value


def shape_of(value: Any, where: str) -> tuple[int, ...]:
    dims = sequence(value, where)
    return tuple(int(number(d, where, integer=True)) for d in dims)


def product(dims: tuple[int, ...] | list[int]) -> int:
    out = 1
    for d in dims:
        out *= int(d)
    return out


@dataclass
class GraphBuilder:
    """Accumulates nodes with consecutive ids; :meth:`build` makes a validated Workload."""

    nodes: list[Node] = field(default_factory=list)

    def add(self, name: str, **kw: Any) -> int:
        nid = len(self.nodes)
        deps = kw.pop("deps", ())
        self.nodes.append(Node(id=nid, name=name, deps=tuple(sorted(set(deps))), **kw))
        return nid

    def build(self, **kw: Any) -> Workload:
        return Workload(nodes=tuple(self.nodes), **kw).validate()


def safe_name(stem: str) -> str:
    """A workload name usable as a file name: letters, digits, ``._-``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._") or "imported"
    return name[:120]
