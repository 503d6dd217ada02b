"""User-defined topologies from YAML (files under ``topologies/``).

Two forms. An explicit graph::

    name: two_leaves
    routing: ecmp                 # shortest | ecmp
    defaults: {bandwidth_Bps: 50.0e9, latency_s: 1.0e-6}
    endpoints: 8                  # named gpu0..gpu7 (or a list of names, in rank order)
    switches: [leaf0, leaf1, spine]
    links:                        # full duplex unless duplex: false
      - [gpu0, leaf0]             # defaults apply
      - {a: leaf0, b: spine, bandwidth_Bps: 100.0e9, latency_s: 2.0e-6}

or a standard shape: ``builder: {type: torus2d, rows: 4, cols: 4, bandwidth_Bps: ..., latency_s: ...}``
(types: star, ring, torus2d, fat_tree, bcube, leaf_spine, rail_optimized; keyword arguments of the
functions in :mod:`estimator.topology.builders`).

:func:`load_spec` reads a file without building a standard shape's graph: a
:class:`TopologySpec` names the builder and its checked arguments (the ``custom`` fabric prices
regular shapes analytically, :mod:`estimator.fabrics.custom`, and builds the graph only if a
schedule needs it); :func:`load_topology` builds it.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from estimator import limits
from estimator.errors import EstimatorError
from estimator.files import decode_text, excerpt, read_input
from estimator.topology import builders
from estimator.topology.graph import Topology

#: deepest run of opening brackets accepted before parsing (real topology files nest 2-3 deep).
MAX_FLOW_DEPTH = 64
#: lines and commas a topology file may have per vertex or link of ``limits.topology_nodes`` (a
#: link written as a block mapping takes up to ~6): counted before the YAML is parsed
ITEMS_PER_VERTEX = 8
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
BUILDERS = {name: getattr(builders, name) for name in
            ("star", "ring", "torus2d", "fat_tree", "bcube", "leaf_spine", "rail_optimized")}


@dataclass(frozen=True)
class TopologySpec:
    """A checked topology file: a standard shape's ``kind`` (builder type) and keyword ``args``
    (built on :meth:`build`), or an explicit graph (``kind = "graph"``, already built)."""

    path: Path
    kind: str
    args: dict[str, Any] = field(default_factory=dict)
    graph: Topology | None = None
    digest: str = ""  # of the file's text: files with equal digests are the same topology

    @property
    def endpoints(self) -> int:
        if self.graph is not None:
            return self.graph.num_endpoints
        return builder_endpoints(self.kind, self.args)

    def build(self) -> Topology:
        if self.graph is not None:
            return self.graph
        return _guarded(self.path, lambda: BUILDERS[self.kind](**self.args))


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology file; every problem is one EstimatorError line naming the file."""
    return load_spec(path).build()


def load_spec(path: str | Path) -> TopologySpec:
    """Read and validate a topology file without building a standard shape (see :class:`TopologySpec`)."""
    path = Path(path)
    data = read_input(path, "topology", "topology_mb")  # regular file, size-limited
    text = decode_text(data, path, "topology file")
    if re.search(r"[\[{]{" + str(MAX_FLOW_DEPTH + 1) + ",}", text):  # refuse absurd nesting before the slow scanner
        raise EstimatorError(f"{path}: not valid YAML (nested more than {MAX_FLOW_DEPTH} levels deep)")
    items = data.count(b"\n") + data.count(b",")  # every list entry or mapping key needs one: an upper bound
    if items > ITEMS_PER_VERTEX * limits.get().topology_nodes:
        raise EstimatorError(f"{path}: {items} lines and commas, more than a topology of limits.topology_nodes = "
                             f"{limits.get().topology_nodes} vertices and links needs ({ITEMS_PER_VERTEX} each)")
    try:
        doc = yaml.load(text, Loader=_LOADER)  # the C parser when PyYAML has it (~2.5x faster)
    except yaml.YAMLError as exc:
        raise EstimatorError(f"{path}: not valid YAML ({excerpt(str(exc).splitlines()[0], 80)})") from None
    except RecursionError:
        raise EstimatorError(f"{path}: not valid YAML (nested too deeply)") from None
    if not isinstance(doc, dict):
        raise EstimatorError(f"{path}: a topology file must be a mapping")
    digest = hashlib.sha256(text.encode()).hexdigest()
    if "builder" in doc:
        kind, args = _guarded(path, lambda: _builder_args(str(doc.get("name", path.stem)), doc["builder"]))
        return TopologySpec(path, kind, args, digest=digest)
    return TopologySpec(path, "graph", graph=_guarded(path, lambda: topology_from_dict(doc, default_name=path.stem)),
                        digest=digest)


def _guarded(path: Path, make):
    """``make()`` with every problem as one EstimatorError line naming ``path``."""
    try:
        return make()
    except EstimatorError as exc:
        raise EstimatorError(f"{path}: {exc}") from None
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, ZeroDivisionError, RecursionError) as exc:
        # safety net: a malformed file must never surface as a traceback
        raise EstimatorError(f"{path}: malformed topology file ({type(exc).__name__}: {excerpt(str(exc), 80)})") from None


def topology_from_dict(doc: dict[str, Any], default_name: str = "custom") -> Topology:
    name = str(doc.get("name", default_name))
    if "builder" in doc:
        return _from_builder(name, doc["builder"])
    unknown = sorted(set(doc) - {"name", "routing", "defaults", "endpoints", "switches", "links", "description"})
    if unknown:  # an excerpt only: the "keys" of a wrong file are its contents
        raise EstimatorError(f"unknown key {excerpt(str(unknown[0]), 16)} ({len(unknown)} unknown key(s); "
                             "known: name, routing, defaults, endpoints, switches, links, description, builder)")
    topo = Topology(name, str(doc.get("routing", "shortest")))
    defaults = doc.get("defaults") or {}
    eps = doc.get("endpoints")
    if isinstance(eps, int) and not isinstance(eps, bool):
        limits.check_count(eps, "topology_nodes", "endpoints")  # before building a name per endpoint
    names = [f"gpu{i}" for i in range(eps)] if isinstance(eps, int) else eps
    if not isinstance(names, list) or not names:
        raise EstimatorError("'endpoints' must be a positive count or a list of names")
    for key in ("switches", "links"):
        if isinstance(doc.get(key), list) and len(doc[key]) > limits.get().topology_nodes:
            raise EstimatorError(f"'{key}': {len(doc[key])} entries exceed limits.topology_nodes")
    ids: dict[str, int] = {}
    for label in names:
        _new(ids, str(label), topo.add_endpoint(str(label)))
    for label in doc.get("switches") or []:
        _new(ids, str(label), topo.add_switch(str(label)))
    links = doc.get("links")
    if not isinstance(links, list) or not links:
        raise EstimatorError("'links' must be a non-empty list")
    for i, spec in enumerate(links):
        if isinstance(spec, list | tuple) and len(spec) == 2:
            spec = {"a": spec[0], "b": spec[1]}
        if not isinstance(spec, dict) or "a" not in spec or "b" not in spec:
            raise EstimatorError(f"links[{i}] must be [a, b] or a mapping with a and b")
        a, b = (ids.get(str(spec[k])) for k in ("a", "b"))
        if a is None or b is None:
            raise EstimatorError(f"links[{i}] names an undeclared node ({spec['a']!r} or {spec['b']!r})")
        bw = _num(spec.get("bandwidth_Bps", defaults.get("bandwidth_Bps")), f"links[{i}].bandwidth_Bps")
        lat = _num(spec.get("latency_s", defaults.get("latency_s", 0.0)), f"links[{i}].latency_s")
        if spec.get("duplex", True):
            topo.connect(a, b, bw, lat)
        else:
            topo.add_link(a, b, bw, lat)
    return topo


def _new(ids: dict[str, int], label: str, node: int) -> None:
    if label in ids:
        raise EstimatorError(f"node name {label!r} is declared twice")
    ids[label] = node


def _num(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise EstimatorError(f"{what} must be a number, got {excerpt(value)}") from None
    if not math.isfinite(number):
        raise EstimatorError(f"{what} must be a finite number, got {excerpt(value)}")
    return number


def _maybe_number(value: Any) -> Any:
    """PyYAML reads ``12.5e9`` (no exponent sign) as a string; accept it as a number."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                continue
    return value


def _from_builder(name: str, spec: Any) -> Topology:
    kind, args = _builder_args(name, spec)
    return BUILDERS[kind](**args)


def _builder_args(name: str, spec: Any) -> tuple[str, dict[str, Any]]:
    """The builder type and its checked keyword arguments (nothing built)."""
    if not isinstance(spec, dict) or spec.get("type") not in BUILDERS:
        raise EstimatorError(f"'builder' needs a type among {', '.join(BUILDERS)}")
    fn = BUILDERS[spec["type"]]
    args = {k: _maybe_number(v) for k, v in spec.items() if k not in ("type", "name")}
    args["name"] = name
    try:
        inspect.signature(fn).bind(**args)
    except TypeError as exc:
        raise EstimatorError(f"builder {spec['type']}: {exc}") from None
    params = inspect.signature(fn).parameters
    for key, value in args.items():
        if key != "name" and not isinstance(value, int | float | bool):
            raise EstimatorError(f"builder {spec['type']}: {key} must be a number, got {excerpt(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise EstimatorError(f"builder {spec['type']}: {key} must be finite, got {value!r}")
        if params[key].annotation in ("int", int) and not isinstance(value, int):
            if not (isinstance(value, float) and value.is_integer()):
                raise EstimatorError(f"builder {spec['type']}: {key} must be an integer, got {value!r}")
            args[key] = int(value)
    _check_builder_size(spec["type"], args)
    _check_builder_values(spec["type"], args)
    return spec["type"], args


def builder_endpoints(kind: str, args: dict[str, Any]) -> int:
    """Endpoints the checked builder call ``kind(**args)`` makes (without making them)."""
    if kind == "torus2d":
        return args["rows"] * args["cols"]
    if kind == "bcube":
        return args["radix"] ** args["levels"]
    return args["n"]


def _check_builder_values(kind: str, args: dict[str, Any]) -> None:
    """What the builder (or a link it adds) would refuse, refused before building: bandwidths
    positive, latencies non-negative, group sizes positive, the fat tree's k and host count."""
    for key, value in args.items():
        if key == "name" or isinstance(value, bool):
            continue
        if ("bw" in key or "bandwidth" in key) and not value > 0:
            raise EstimatorError(f"builder {kind}: {key} must be a positive bandwidth, got {value!r}")
        if "latency" in key and not value >= 0:
            raise EstimatorError(f"builder {kind}: {key} must be a non-negative latency, got {value!r}")
        if key in ("per_leaf", "per_node") and value < 1:
            raise EstimatorError(f"builder {kind}: {key} must be >= 1, got {value!r}")
    if kind == "fat_tree":
        builders.check_fat_tree(args["k"], args["n"])


def _check_builder_size(kind: str, args: dict[str, Any]) -> None:
    """Refuse a standard shape larger than ``limits.topology_nodes`` vertices before building it
    (a ring of 10**9 nodes or BCube(10, 10**6) must fail at once, not exhaust memory)."""
    ints = {k: v for k, v in args.items() if isinstance(v, int) and not isinstance(v, bool)}
    for key, value in ints.items():
        if value < 0:
            raise EstimatorError(f"builder {kind}: {key} must be >= 0, got {value}")
    limit = limits.get().topology_nodes
    if kind == "bcube":
        radix, levels = ints.get("radix", 1), ints.get("levels", 1)
        big = radix > 1 and levels * math.log2(radix) > math.log2(limit)
        size = float(radix) ** levels if big else radix**levels * (levels + 1)
    elif kind == "fat_tree":
        size = min(ints.get("k", 0), limit + 1) ** 3
    elif kind == "torus2d":
        size = ints.get("rows", 0) * ints.get("cols", 0)
    elif kind == "leaf_spine":
        leaves = -(-ints.get("n", 0) // max(1, ints.get("per_leaf", 1)))
        size = ints.get("n", 0) + leaves * (1 + ints.get("spines", 0))  # endpoints, leaves + their uplinks
    else:  # star, ring, rail_optimized
        size = ints.get("n", 0) + ints.get("per_node", 0)
    if size > limit:
        raise EstimatorError(f"builder {kind}: about {size:.3g} vertices/links exceeds limits.topology_nodes = {limit}")
