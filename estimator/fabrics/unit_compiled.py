"""Compiled schedules shared across configs that differ only in link latency / bandwidth / α / γ.

For a fabric whose links all have one bandwidth ``B`` and whose link latencies are all ``L`` or 0
(fat tree, torus, ring, BCube), a compiled step's coefficients are, per transfer,
``c0 = α + L·hops`` and ``c1 = load / B`` and the reduction slope is ``γ·reduced``, where
``hops`` (latency-carrying links on the slowest path) and ``load`` (bytes per byte of M on the
busiest link) depend on the topology's shape only. So the schedule is compiled once per shape on
the same topology with ``B = L = 1`` and ``α = 0``, ``γ = 1`` (:mod:`estimator.collectives.pricing`),
kept per process, and rescaled for each config (a few array operations). Results equal the
direct compilation up to rounding (tested to 1e-12).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from estimator.collectives.pricing import CompiledSchedule, PricingParams, compile_schedule, rescale
from estimator.topology.graph import Topology

_COMPILED: dict[tuple[Any, ...], CompiledSchedule] = {}
_TOPOLOGIES: dict[tuple[Any, ...], Topology] = {}
MAX_ENTRIES = 1024  # compiled schedules kept (small: a few arrays per distinct step)
MAX_TOPOLOGIES = 4  # unit topologies kept (large: a 65,536-GPU fat tree is ~100 MB with its routes)
UNIT = PricingParams(memory_bandwidth_Bps=1.0)  # γ = 1: the reduction slope comes out in bytes


class UnitCompiled:
    """Mixin for a :class:`~estimator.fabrics.library.LibraryFabric` with uniform links. The fabric
    names its latency and bandwidth config fields (``UNIT_FIELDS = (latency, bandwidth)``)."""

    UNIT_FIELDS: tuple[str, str] = ("link_latency_s", "link_bandwidth_Bps")
    SCALE_FREE = ("alpha_s", "memory_bandwidth_Bps")  # priced after compilation

    def unit_scale(self) -> tuple[float, float]:
        """(latency, bandwidth) the unit schedule is scaled by."""
        lat, bw = self.UNIT_FIELDS
        return getattr(self.config, lat), getattr(self.config, bw)  # type: ignore[attr-defined]

    def _shape(self) -> tuple[Any, ...]:
        skip = {*self.UNIT_FIELDS, *self.SCALE_FREE}
        items = self.config.to_dict().items()  # type: ignore[attr-defined]
        return (type(self).__name__, tuple(sorted((k, v) for k, v in items if k not in skip)))

    def _unit_topology(self, algorithm: str) -> Topology:
        key = (*self._shape(), self.topology_key(algorithm))  # type: ignore[attr-defined]
        topo = _TOPOLOGIES.get(key)
        if topo is None:
            lat, bw = self.UNIT_FIELDS
            unit = type(self)(replace(self.config, **{lat: 1.0, bw: 1.0}))  # type: ignore[attr-defined]
            topo = unit.build_topology(algorithm)
            _remember(_TOPOLOGIES, key, topo, MAX_TOPOLOGIES)
        return topo

    def compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule:
        key = (*self._shape(), collective, algorithm, n)
        unit = _COMPILED.get(key)
        if unit is None:
            sched = self.schedule(collective, algorithm, n, 1.0)  # type: ignore[attr-defined]
            unit = compile_schedule(sched, self._unit_topology(algorithm), UNIT, self.ranks(n))  # type: ignore[attr-defined]
            _remember(_COMPILED, key, unit)
        latency, bandwidth = self.unit_scale()
        return rescale(unit, self.pricing(algorithm), latency, bandwidth)  # type: ignore[attr-defined]


def _remember(cache: dict, key: tuple[Any, ...], value: Any, limit: int = MAX_ENTRIES) -> None:
    if len(cache) >= limit:
        del cache[next(iter(cache))]
    cache[key] = value
