"""Pricing explicit schedules on per-round optical circuits (a generic hook the collective
library does not have: per-round reconfiguration latency and per-circuit bandwidth splitting).

Model: in every step each endpoint sets up one circuit per distinct destination it sends to; an
endpoint's ``wavelengths`` lasers are split evenly over its circuits in whole wavelengths, so a
circuit gets ``floor(W / c) / W`` of the endpoint's egress bandwidth when it drives ``c`` circuits.
A step costs ``alpha`` + (``reconfig`` if it sets up new circuits) + the slowest transfer at its
circuit's bandwidth. This is the explicit, slow path; fabrics use closed forms tested equal to it.
"""

from __future__ import annotations

from collections import defaultdict

from estimator.collectives.schedule import Schedule


def circuit_share(circuits: int, wavelengths: int) -> float:
    """Fraction of an endpoint's egress one of its ``circuits`` circuits gets."""
    if circuits <= 1 or wavelengths <= 0:
        return 1.0
    per = wavelengths // circuits
    if per < 1:
        # more circuits than lasers: circuits time-share single wavelengths
        return 1.0 / circuits
    return per / wavelengths


def price_on_circuits(
    schedule: Schedule, bandwidth_Bps: float, alpha_s: float, reconfig_s: float, wavelengths: int
) -> tuple[float, float]:
    """``(time_s, reconfig_time_s)`` of ``schedule`` on per-round circuits."""
    total = reconf_total = 0.0
    prev: set[tuple[int, int]] | None = None
    for step in schedule.steps:
        if not step.transfers:
            continue
        dests: dict[int, set[int]] = defaultdict(set)
        for t in step.transfers:
            dests[t.src].add(t.dst)
        worst = max(
            t.nbytes / (bandwidth_Bps * circuit_share(len(dests[t.src]), wavelengths)) for t in step.transfers
        )
        circuits = {(t.src, t.dst) for t in step.transfers}
        reconf = reconfig_s if (step.reconfigure or prev is None or not circuits <= prev) else 0.0
        total += alpha_s + reconf + worst
        reconf_total += reconf
        prev = circuits
    return total, reconf_total
