"""Per-round optical circuits as a topology the shared library can price.

The collective library prices a schedule on a topology with per-step reconfiguration
(:func:`estimator.collectives.pricing.mark_reconfigurations`, ``PricingParams.reconfig_s``). What
it does not have is circuit *bandwidth splitting*: an endpoint that drives ``c`` circuits at once
splits its ``W`` lasers over them in whole wavelengths, so each circuit gets ``floor(W / c) / W``
of its egress. For an algorithm whose every step drives the same number of circuits per endpoint
(Lumorph-k: k-1), that is a full mesh of direct circuits of that bandwidth: :func:`circuit_mesh`.
"""

from __future__ import annotations

from estimator.topology.graph import Topology


def circuit_share(circuits: int, wavelengths: int) -> float:
    """Fraction of an endpoint's egress one of its ``circuits`` concurrent circuits gets."""
    if circuits <= 1 or wavelengths <= 0:
        return 1.0
    per = wavelengths // circuits
    if per < 1:
        # more circuits than lasers: circuits time-share single wavelengths
        return 1.0 / circuits
    return per / wavelengths


def circuit_mesh(n: int, bandwidth_Bps: float, circuits: int, wavelengths: int, name: str = "circuits") -> Topology:
    """A direct circuit from every endpoint to every other, each at the bandwidth an endpoint
    driving ``circuits`` circuits gives one of them (only the circuits a step uses exist then)."""
    topo = Topology(name, "shortest")
    eps = [topo.add_endpoint(f"tile{i}") for i in range(n)]
    bw = bandwidth_Bps * circuit_share(circuits, wavelengths)
    for a in range(n):
        for b in range(n):
            if a != b:
                topo.add_link(eps[a], eps[b], bw, 0.0)
    return topo
