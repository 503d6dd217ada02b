"""Packet-level simulation of OPSquare and the NVLink leaf-spine (seed 004): a fidelity level of
its own, independent of the analytical fabrics.

``simulate(spec)`` runs one seeded, deterministic experiment and returns a
:class:`~estimator.packetsim.results.PacketSimResult`. Both engines are vectorised with NumPy
(no Python object per packet): OPSquare is time-slotted (one slot = one packet time at the
transceiver rate) with per-slot contention resolution; the leaf-spine uses output-queued
switches whose FIFO departures are computed in closed form (Lindley recursion) per slot.
"""

from __future__ import annotations

from estimator.packetsim.params import LeafSpineParams, OpsquareParams, SimSpec
from estimator.packetsim.results import PacketSimResult


def simulate(spec: SimSpec) -> PacketSimResult:
    """Run one packet-level experiment described by ``spec``."""
    if spec.network == "leafspine":
        from estimator.packetsim.leafspine import LeafSpineSim

        return LeafSpineSim(spec).run()
    from estimator.packetsim.opsquare import OpsquareSim
    from estimator.packetsim.traffic import (
        hierarchical_allreduce,
        hierarchical_direct_allreduce,
        ring_allreduce,
    )

    plan = None
    if spec.traffic == "ring_allreduce":
        plan = ring_allreduce(spec.nodes, spec.collective_bytes, spec.packet_bytes)
    elif spec.traffic in ("hierarchical_allreduce", "hierarchical_direct_allreduce"):
        pods, m, _ = spec.opsquare.layout(spec.nodes)
        build = hierarchical_allreduce if spec.traffic == "hierarchical_allreduce" else hierarchical_direct_allreduce
        plan = build(pods, m, spec.collective_bytes, spec.packet_bytes)
    return OpsquareSim(spec, plan).run()


__all__ = ["LeafSpineParams", "OpsquareParams", "PacketSimResult", "SimSpec", "simulate"]
