"""ASTRA-sim 2.0 configs (analytical network backend) for a fabric ASTRA-sim can express.

Written beside exported Chakra traces so the same workload runs in ASTRA-sim:

* ``network.yml`` -- ``topology``, ``npus_count``, ``bandwidth`` (GB/s per uni-directional link)
  and ``latency`` (ns per link). ASTRA-sim's input-format documentation (network config,
  "Bandwidth") states that it "deems 1 GB as 2^30 B, and 1 s as 10^9 ns"; bandwidth is converted
  accordingly (bytes/s / 2^30).
* ``system.json`` -- collective algorithms per dimension and scheduling knobs.
* ``remote_memory.json`` -- no memory expansion.

Mapping (the only fabrics whose model is one ASTRA-sim topology building block):

* ``ideal`` (non-blocking switch, ``bandwidth_Bps`` per endpoint per direction, ``alpha_s`` per
  message) -> ``Switch`` with that bandwidth and latency (ring all-reduce / all-gather /
  reduce-scatter, direct all-to-all, see ``SYSTEM_DEFAULTS``).
* ``ring`` (bidirectional ring of ``nodes``) -> ``Ring`` with the same keys.

``npus_count`` is the workload's device count (ASTRA-sim needs exactly one ET file per NPU), so
``fabric.nodes`` is not used: the fabric contributes its technology parameters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError

GIB = 2**30  # ASTRA-sim's "GB" (input-format docs: 1 GB = 2^30 B)
TOPOLOGY = {"ideal": "Switch", "ring": "Ring"}

# ASTRA-sim system-layer knobs: the stock single-dimension system template that ASTRA-sim's
# documentation ("Argument ${SYSTEM_CONFIG}", astra-sim-docs) and public example configs use --
# LIFO scheduling, 1 active chunk per dimension, 4 dataset splits, 10 ns endpoint delay, ring
# all-reduce/all-gather/reduce-scatter, direct all-to-all, local memory bandwidth 1600 GB/s.
SYSTEM_DEFAULTS: dict[str, Any] = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["direct"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "boost-mode": 0,
}


def _param(fabric: dict[str, Any], key: str) -> float:
    value = fabric.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise EstimatorError(f"fabric.{key}: ASTRA-sim export needs a non-negative number, got {value!r}")
    return float(value)


def network_config(fabric: dict[str, Any], npus: int) -> str:
    name = str(fabric.get("name", ""))
    if name not in TOPOLOGY:
        raise EstimatorError(f"fabric {name!r} has no ASTRA-sim equivalent; export supports "
                             f"{', '.join(sorted(TOPOLOGY))} (set fabric=ideal or export.astrasim=false)")
    bandwidth = _param(fabric, "bandwidth_Bps") / GIB
    latency = _param(fabric, "alpha_s") * 1e9
    return (f"# ASTRA-sim analytical network: estimator fabric {name!r}\n"
            f"topology: [ {TOPOLOGY[name]} ]\n"
            f"npus_count: [ {npus} ]\n"
            f"bandwidth: [ {bandwidth:.6f} ]  # GB/s (1 GB = 2^30 B) = {fabric['bandwidth_Bps']} B/s\n"
            f"latency: [ {latency:.3f} ]  # ns = fabric alpha_s {fabric['alpha_s']} s\n")


def write_configs(fabric: dict[str, Any], npus: int, out_dir: Path, write: Any) -> list[str]:
    """Write the three configs with ``write(path, bytes)`` (atomic); return their paths."""
    files = {
        "network.yml": network_config(fabric, npus).encode(),
        "system.json": json.dumps(SYSTEM_DEFAULTS, indent=2).encode(),
        "remote_memory.json": json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}, indent=2).encode(),
    }
    out = []
    for name, data in files.items():
        write(out_dir / name, data)
        out.append(str(out_dir / name))
    return out
