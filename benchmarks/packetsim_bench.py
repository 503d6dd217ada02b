"""Benchmark the packet-level engines: wall time and packets/s, one core, 20 + 20 µs windows.

    python benchmarks/packetsim_bench.py            # 256 and 1024 nodes, load 0.6, locality 0.5
    python benchmarks/packetsim_bench.py --quick    # 256 nodes only

Target (issue 6): a 1024-node, 40 µs run at load 0.6 in under a minute on one core. Also prints
the all-reduce cross-check at 256 nodes (packet level vs closed forms, and vs the analytical
`opsquare` fabric when estimator/fabrics/opsquare.py exists).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

from estimator.packetsim import SimSpec, analytical, simulate  # noqa: E402


def bench(sizes: list[int]) -> None:
    print(f"{'network':<10} {'nodes':>5} {'load':>4} {'wall_s':>7} {'packets':>9} {'pkts/s':>9} "
          f"{'thru':>6} {'loss':>6} {'intra_us':>8} {'inter_us':>8}")
    for nodes in sizes:
        for network in ("opsquare", "leafspine"):
            s = simulate(SimSpec(network=network, nodes=nodes, load=0.6, locality=0.5, seed=1)).summary()
            print(f"{network:<10} {nodes:>5} {0.6:>4} {s['wall_s']:>7.2f} {s['packets_simulated']:>9} "
                  f"{s['packets_per_s']:>9.3g} {s['throughput']:>6.3f} {s['loss_ratio']:>6.3f} "
                  f"{s['latency_intra_mean_s'] * 1e6:>8.3f} {s['latency_inter_mean_s'] * 1e6:>8.3f}")


def collective_check(nodes: int, nbytes: float) -> None:
    """Packet level vs closed forms vs the analytical `opsquare` fabric (when present)."""
    fabric = None
    try:
        from estimator.fabrics.registry import make_fabric

        pods, m, groups = SimSpec(nodes=nodes).opsquare.layout(nodes)
        fabric = make_fabric({"name": "opsquare", "nodes": nodes, "pods": pods, "pod_nodes": m, "groups": groups})
    except Exception as exc:  # the fabric is another engineer's; report, do not fail
        print(f"  analytical opsquare fabric unavailable: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    closed = {"ring_allreduce": analytical.ring_critical_path, "hierarchical_allreduce": analytical.hierarchical}
    fabric_alg = {"hierarchical_allreduce": "hierarchical_ring", "hierarchical_direct_allreduce": "hierarchical",
                  "hierarchical_scheduled_allreduce": "hierarchical"}
    for traffic in ("ring_allreduce", "hierarchical_allreduce", "hierarchical_direct_allreduce",
                    "hierarchical_scheduled_allreduce"):
        spec = SimSpec(nodes=nodes, traffic=traffic, collective_bytes=nbytes)
        r = simulate(spec).summary()
        line = f"{traffic:<34} {nodes:>5} {nbytes:>10.0f} B  packet level {r['completion_s'] * 1e6:9.3f} us"
        if traffic in closed:
            line += f"  closed form {closed[traffic](spec) * 1e6:9.3f} us"
        if traffic == "ring_allreduce":
            line += f"  textbook alpha-beta {analytical.ring_alpha_beta(spec) * 1e6:9.3f} us"
        if fabric is not None and traffic in fabric_alg:
            cost = fabric.collective_cost("all_reduce", nbytes, fabric_alg[traffic]).time_s
            line += f"  fabric {fabric_alg[traffic]} {cost * 1e6:9.3f} us"
        print(line + f"  ({r['wall_s']:.1f} s wall)")


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    bench([256] if quick else [256, 1024])
    collective_check(256, 16 * 16 * 1500 * 16)  # 6.1 MB: whole packets in every phase
