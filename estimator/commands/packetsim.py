"""Packet-level simulation of OPSquare or the NVLink leaf-spine (seed 004).

    estimator packetsim network=opsquare nodes=256 load=0.6 locality=0.5 seed=1 output=json
    estimator packetsim network=leafspine nodes=1024 load=0.8 locality=0.33
    estimator packetsim traffic=ring_allreduce nodes=64 collective_bytes=1e6
    estimator packetsim experiment=opsquare_packet          # sweep on Ray into DuckDB (`packetsim` table)

Uniform traffic reports throughput (fraction of node capacity), loss ratio and mean/p99 latency
(all, intra-pod, inter-pod) over the measured window; collective traffic reports its completion
time. Parameters and their sources: conf/packetsim.yaml.
"""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig

from estimator.config import to_container

HELP = "packet-level OPSquare / NVLink leaf-spine simulation (throughput, latency, loss vs load)"
CONFIG_NAME = "packetsim"


def check(cfg: DictConfig) -> None:
    """``--check``: the simulation's parameters (every point of an experiment), nothing simulated."""
    from estimator.packetsim import sweep

    if cfg.get("experiment"):
        sweep.points(cfg)
    else:
        sweep.spec_from_config(to_container(cfg))


def run(cfg: DictConfig) -> dict[str, Any]:
    from estimator.packetsim import simulate, sweep

    if cfg.get("experiment"):
        return sweep.run_sweep(cfg)
    return simulate(sweep.spec_from_config(to_container(cfg))).summary()


def _us(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value * 1e6:.3f} us"


def format_text(result: dict[str, Any]) -> str:
    if "experiment" in result:
        return "\n".join(f"{k:<10} {v}" for k, v in result.items())
    r = result
    what = "" if "completion_s" in r else f" · load {r['load']:g} · locality {r['locality']:g}"
    lines = [f"{r['network']} · {r['nodes']} nodes · {r['traffic']}{what} · seed {r['seed']}"]
    if "completion_s" in r:
        lines.append(f"completion      {_us(r['completion_s'])} for {r['collective_bytes']:.6g} bytes per node")
    else:
        lines += [
            f"throughput      {r['throughput']:.4f} of node capacity (offered {r['offered']:.4f})",
            f"loss ratio      {r['loss_ratio']:.4g}",
        ]
    lines += [
        f"latency all     mean {_us(r['latency_mean_s'])}   p99 {_us(r['latency_p99_s'])}",
        f"latency intra   mean {_us(r['latency_intra_mean_s'])}   p99 {_us(r['latency_intra_p99_s'])}",
        f"latency inter   mean {_us(r['latency_inter_mean_s'])}   p99 {_us(r['latency_inter_p99_s'])}",
        f"packets         sent {r['sent']}  received {r['received']}  lost {r['lost']}  (simulated {r['packets_simulated']})",
        f"wall time       {r['wall_s']:.2f} s ({r['packets_per_s']:.3g} packets/s)",
    ]
    return "\n".join(lines)
