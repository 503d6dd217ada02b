"""Packet-level simulation of OPSquare and the NVLink leaf-spine (seed 004), and of collectives on
SiPAC and the electrical BCube (seed 003, :mod:`.collnet`): a fidelity level of its own,
independent of the analytical fabrics.

``simulate(spec)`` runs one seeded, deterministic experiment and returns a
:class:`~estimator.packetsim.results.PacketSimResult`. Both engines are vectorised with NumPy
(no Python object per packet): OPSquare is time-slotted (one slot = one packet time at the
transceiver rate) with per-slot contention resolution; the leaf-spine uses output-queued
switches whose FIFO departures are computed in closed form (Lindley recursion) per slot.
"""

from __future__ import annotations

from estimator.packetsim.params import COLLNETS, LeafSpineParams, OpsquareParams, SimSpec
from estimator.packetsim.results import PacketSimResult


def simulate(spec: SimSpec) -> PacketSimResult:
    """Run one packet-level experiment described by ``spec``."""
    if spec.network in COLLNETS:
        from estimator.packetsim.collnet import simulate_collnet

        return simulate_collnet(spec)
    if spec.network == "leafspine":
        from estimator.packetsim.leafspine import LeafSpineSim

        return LeafSpineSim(spec).run()
    from estimator.packetsim import traffic
    from estimator.packetsim.opsquare import OpsquareSim

    plan = None
    pods, m, groups = spec.opsquare.layout(spec.nodes)
    nbytes, pkt = spec.collective_bytes, spec.packet_bytes
    if spec.traffic == "ring_allreduce":
        plan = traffic.ring_allreduce(spec.nodes, nbytes, pkt)
    elif spec.traffic == "hierarchical_allreduce":
        plan = traffic.hierarchical_allreduce(pods, m, nbytes, pkt)
    elif spec.traffic == "hierarchical_direct_allreduce":
        plan = traffic.hierarchical_direct_allreduce(pods, m, nbytes, pkt)
    elif spec.traffic == "hierarchical_scheduled_allreduce":
        plan = traffic.hierarchical_scheduled_allreduce(pods, m, groups, nbytes, pkt)
    return OpsquareSim(spec, plan).run()


__all__ = ["LeafSpineParams", "OpsquareParams", "PacketSimResult", "SimSpec", "simulate"]
