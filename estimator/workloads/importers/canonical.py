"""Field-type checks for a canonical workload document (``traces/*.workload.json``) before it is
turned into a :class:`~estimator.workloads.graph.Workload`.

:func:`estimator.files.parse_json` already refused NaN/Infinity and integers beyond 64 bits; this
checks that ids, deps, groups and devices are integers, sizes and times are numbers, names are
strings, and that the counts are within :mod:`estimator.limits` (a file claiming 2**63 devices
fails here, before anything allocates per device). Errors name the field (``nodes[3].deps[0]``).
"""

from __future__ import annotations

from typing import Any

from estimator import limits
from estimator.errors import EstimatorError
from estimator.files import excerpt

_INT = ("id", "device", "src", "dst")
_INT_LISTS = ("deps", "group")
_NUMBERS = ("flops", "mem_bytes", "weight_bytes", "comm_bytes", "duration_s")  # weight_bytes: format v2 (main)
_STRINGS = ("name", "kind", "op", "op_class", "phase", "collective")


def _int(value: Any, where: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EstimatorError(f"{where}: expected an integer, got {excerpt(value)}")
    if minimum is not None and value < minimum:
        raise EstimatorError(f"{where}: must be >= {minimum}, got {value}")
    return value


def _number(value: Any, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EstimatorError(f"{where}: expected a number, got {excerpt(value)}")


def check_workload_doc(doc: Any) -> None:
    """Raise one :class:`EstimatorError` naming the first badly typed field of ``doc``."""
    if not isinstance(doc, dict):
        raise EstimatorError(f"not an estimator workload (a JSON {type(doc).__name__}, expected an object)")
    if doc.get("format") != "estimator.workload":
        return  # Workload.from_dict names this problem
    for key in ("devices", "batch_size"):
        if key in doc:
            limits.check_count(doc[key], "devices" if key == "devices" else "batch", f"field {key}")
    if "params" in doc:
        _int(doc["params"], "field params", 0)
    if "forward_flops" in doc:
        _number(doc["forward_flops"], "field forward_flops")
    if not isinstance(doc.get("meta", {}), dict):
        raise EstimatorError("field meta: expected an object")
    nodes = doc.get("nodes")
    if not isinstance(nodes, list):
        raise EstimatorError("field nodes: expected a list")
    if len(nodes) > limits.get().graph_nodes:
        raise EstimatorError(f"field nodes: {len(nodes)} nodes exceeds the limit of {limits.get().graph_nodes} "
                             "(limits.graph_nodes)")
    for i, node in enumerate(nodes):
        where = f"nodes[{i}]"
        if not isinstance(node, dict):
            raise EstimatorError(f"{where}: expected an object")
        for key in _INT:
            if key in node:
                _int(node[key], f"{where}.{key}")
        for key in _INT_LISTS:
            if key in node:
                if not isinstance(node[key], list):
                    raise EstimatorError(f"{where}.{key}: expected a list of integers")
                for j, v in enumerate(node[key]):
                    _int(v, f"{where}.{key}[{j}]")
        for key in _NUMBERS:
            if node.get(key) is not None:
                _number(node[key], f"{where}.{key}")
        for key in _STRINGS:
            if key in node and not isinstance(node[key], str):
                raise EstimatorError(f"{where}.{key}: expected a string, got {excerpt(node[key])}")
        shapes = node.get("input_shapes", [])
        if not isinstance(shapes, list) or not all(isinstance(s, list) for s in shapes):
            raise EstimatorError(f"{where}.input_shapes: expected a list of lists of integers")
        for j, shape in enumerate(shapes):
            for k, d in enumerate(shape):
                _int(d, f"{where}.input_shapes[{j}][{k}]")
        if "attrs" in node and not isinstance(node["attrs"], dict):
            raise EstimatorError(f"{where}.attrs: expected an object")
    grads = doc.get("gradients", [])
    if not isinstance(grads, list):
        raise EstimatorError("field gradients: expected a list")
    for i, g in enumerate(grads):
        if not isinstance(g, dict):
            raise EstimatorError(f"gradients[{i}]: expected an object")
        for key in ("nbytes", "ready_node", "order"):
            _int(g.get(key), f"gradients[{i}].{key}")
