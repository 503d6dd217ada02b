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
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import yaml

from estimator.errors import EstimatorError
from estimator.topology import builders
from estimator.topology.graph import Topology

BUILDERS = {name: getattr(builders, name) for name in
            ("star", "ring", "torus2d", "fat_tree", "bcube", "leaf_spine", "rail_optimized")}


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology file; every problem is one EstimatorError line naming the file."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise EstimatorError(f"{path}: cannot read topology file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise EstimatorError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise EstimatorError(f"{path}: a topology file must be a mapping")
    try:
        return topology_from_dict(doc, default_name=path.stem)
    except EstimatorError as exc:
        raise EstimatorError(f"{path}: {exc}") from None


def topology_from_dict(doc: dict[str, Any], default_name: str = "custom") -> Topology:
    name = str(doc.get("name", default_name))
    if "builder" in doc:
        return _from_builder(name, doc["builder"])
    unknown = sorted(set(doc) - {"name", "routing", "defaults", "endpoints", "switches", "links", "description"})
    if unknown:
        raise EstimatorError(f"unknown key(s) {unknown}")
    topo = Topology(name, str(doc.get("routing", "shortest")))
    defaults = doc.get("defaults") or {}
    eps = doc.get("endpoints")
    names = [f"gpu{i}" for i in range(eps)] if isinstance(eps, int) else eps
    if not isinstance(names, list) or not names:
        raise EstimatorError("'endpoints' must be a positive count or a list of names")
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
        return float(value)
    except (TypeError, ValueError):
        raise EstimatorError(f"{what} must be a number, got {value!r}") from None


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
    if not isinstance(spec, dict) or spec.get("type") not in BUILDERS:
        raise EstimatorError(f"'builder' needs a type among {', '.join(BUILDERS)}")
    fn = BUILDERS[spec["type"]]
    args = {k: _maybe_number(v) for k, v in spec.items() if k not in ("type", "name")}
    args["name"] = name
    try:
        inspect.signature(fn).bind(**args)
    except TypeError as exc:
        raise EstimatorError(f"builder {spec['type']}: {exc}") from None
    for key, value in args.items():
        if key != "name" and not isinstance(value, int | float | bool):
            raise EstimatorError(f"builder {spec['type']}: {key} must be a number, got {value!r}")
    return fn(**args)
