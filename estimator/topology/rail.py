"""Analytic routing on the rail-optimised SuperPOD (:func:`estimator.topology.builders.rail_optimized`):
NVSwitch inside a server, rail switches and spines between servers, ECMP route shares.
"""

from __future__ import annotations

import numpy as np

from estimator.collectives.patterns import Patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.topology import shift_steps
from estimator.topology.analytic import compiled_from_loads, step_row


def rail_compiled(pats: Patterns, per_node: int, nodes: int, nvlink: float, nic: float, latency: float,
                  params: PricingParams, group: int | None = None) -> CompiledSchedule:
    """The same on :func:`estimator.topology.builders.rail_optimized` (``nodes`` GPUs, ``per_node``
    per server) with ECMP. Inside a server a transfer takes GPU -> NVSwitch -> GPU, between GPUs
    of one rail GPU -> rail switch -> GPU; otherwise (server a, rail i to server b, rail j) all
    shortest routes have 4 links and ECMP sends 1/2 through the NVSwitch and GPU (a, j) to rail j,
    1/4 rail i -> spine -> rail j, 1/4 rail i -> GPU (b, i) -> NVSwitch; the spine links carry a
    rail's whole capacity. Loads are summed per link class from those shares; a transfer's busiest
    link is the largest over every link its routes touch. ``group`` = the ranks, whole servers: a
    shift by P (whole servers) maps the step's routes onto themselves, so a P-periodic step is
    priced from its transfers out of ranks 0..P-1 (a GPU's loads are its class mod P's; a rail's
    spine link carries every copy: group / P times the base transfers' share)."""
    g = per_node
    servers = -(-nodes // g)
    rails = min(g, nodes) if servers > 1 else 0
    spine_bw = nic * servers

    def loads(src, dst, nbytes, period):
        a, i = np.divmod(src, g)
        b, j = np.divmod(dst, g)
        local, rail = a == b, (i == j) & (a != b)
        cross = ~local & ~rail
        w = nbytes
        relay_src, relay_dst = a * g + j, b * g + i  # GPU (a, j) and GPU (b, i)
        copies = 1
        if period:  # fold: GPUs by class mod P
            dst, relay_dst, copies = dst % period, relay_dst % period, group // period

        def count(idx, weight, sel, size):
            return np.bincount(idx[sel], weights=weight[sel], minlength=size)

        up_nv = (count(src, w, local, nodes) + count(src, w / 2, cross, nodes) + count(relay_dst, w / 4, cross, nodes))
        down_nv = (count(dst, w, local, nodes) + count(dst, w / 4, cross, nodes) + count(relay_src, w / 2, cross, nodes))
        up_nic = (count(src, w, rail, nodes) + count(src, w / 2, cross, nodes) + count(relay_src, w / 2, cross, nodes))
        down_nic = (count(dst, w, rail, nodes) + count(dst, 3 * w / 4, cross, nodes)
                    + count(relay_dst, w / 4, cross, nodes))
        to_spine = count(i, w / 4, cross, max(rails, 1)) * copies
        from_spine = count(j, w / 4, cross, max(rails, 1)) * copies
        peak = np.where(local, np.maximum(up_nv[src], down_nv[dst]) / nvlink,
                        np.maximum(up_nic[src], down_nic[dst]) / nic)
        if cross.any():
            s, d, rs, rd = src[cross], dst[cross], relay_src[cross], relay_dst[cross]
            nv = np.maximum.reduce([up_nv[s], down_nv[rs], up_nv[rd], down_nv[d]]) / nvlink
            ni = np.maximum.reduce([up_nic[s], up_nic[rs], down_nic[rd], down_nic[d]]) / nic
            sp = np.maximum(to_spine[i[cross]], from_spine[j[cross]]) / spine_bw
            peak[cross] = np.maximum.reduce([nv, ni, sp])
        hops = np.where(cross, 3, 1)  # switch traversals on the slowest route
        return peak, hops

    fold = group if group and group % g == 0 else 0
    shift_rows: dict[tuple, tuple] = {}

    def shaped(step, latencies):  # shift steps folding alike (shift_steps.shift_class) share one row
        key = shift_steps.shift_class(step, fold, g) if fold else None
        if key is not None and key not in shift_rows:
            shift_rows[key] = step_row(step, loads, 1.0, latencies, params, fold, g)
        return shift_rows.get(key)

    # peaks are already seconds per byte of M
    return compiled_from_loads(pats, loads, 1.0, latency, 3, params, fold, shaped, sym=g)
