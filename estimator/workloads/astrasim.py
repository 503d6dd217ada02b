"""ASTRA-sim 2.0 configs (analytical network backend) for a fabric ASTRA-sim can express.

Written beside exported Chakra traces so the same workload runs in ASTRA-sim:

* ``network.yml`` -- ``topology``, ``npus_count``, ``bandwidth`` (GB/s per uni-directional link)
  and ``latency`` (ns per link). ASTRA-sim's input-format documentation (network config,
  "Bandwidth") states that it "deems 1 GB as 2^30 B, and 1 s as 10^9 ns"; bandwidth is converted
  accordingly (bytes/s / 2^30).
* ``system.json`` -- collective algorithms per dimension and scheduling knobs; ``local-mem-bw``
  from the fabric's reduction rate (below).
* ``remote_memory.json`` -- no memory expansion.

Mapping (the fabrics whose model is one ASTRA-sim topology building block). ASTRA-sim's
analytical network backend (github.com/astra-sim/astra-network-analytical @599a047,
``congestion_unaware/basic-topology/BasicTopology.cpp``) charges a message of ``s`` bytes
``hops x latency + s / bandwidth``; ``Switch.cpp`` counts **2 hops** for every message (NPU ->
switch -> NPU), ``Ring.cpp`` the ring distance (1 between neighbours). So:

* ``ideal`` (non-blocking switch, ``bandwidth_Bps`` per endpoint per direction, ``alpha_s`` per
  message) -> ``Switch`` with that bandwidth and latency ``alpha_s / 2`` (charged twice = ``alpha_s``
  per message, as here).
* ``nvlink_leafspine`` with ``latency_model: alpha`` on at most ``gpus_per_node`` devices (one
  NVLink node: every message crosses the node's switch once, ``alpha_s + switch_latency_s``) ->
  ``Switch`` with ``nvlink_bandwidth_Bps`` and latency ``(alpha_s + switch_latency_s) / 2``. Its
  NCCL model and several nodes (a leaf-spine) are refused.
* ``ring`` (``link_bandwidth_Bps``, ``link_latency_s`` per hop, ``alpha_s`` per message) -> ``Ring``
  with bandwidth ``link_bandwidth_Bps`` and latency ``alpha_s + link_latency_s`` (exact for messages
  between neighbours -- every message of the ring algorithms; a k-hop message is charged
  ``k (alpha + L)`` there, ``alpha + k L`` here).
* Chunking: ``preferred-dataset-splits`` = the fabric's ``chunks`` (ASTRA-sim runs the chunks one
  after another with ``active-chunks-per-dimension: 1``; the estimator prices ``chunks x
  cost(M / chunks)``, :meth:`estimator.fabrics.library.LibraryFabric.chunking`). ``chunk_bytes``
  has no ASTRA-sim equivalent (splits are a count) and is refused.
* Reductions: ASTRA-sim's system layer (astra-sim ``system/PacketBundle.cc``) delays every received
  message that must be reduced (the n-1 reduce-scatter steps of a ring all-reduce) by
  ``3 x size / local_mem_bw`` (one write, two reads; ``local-mem-bw`` in GB/s of 10^9 B,
  ``Sys.cc``); the estimator charges ``size / memory_bandwidth_Bps``. So ``local-mem-bw`` =
  ``3 x memory_bandwidth_Bps / 1e9``; ``memory_bandwidth_Bps: 0`` (reductions free) is written as
  :data:`FREE_LOCAL_MEM_GBPS`, at which every reduction delay truncates to 0 ns. The stock
  template's 1600 GB/s would otherwise add ~0.2 ns per byte reduced (28 % of a 1 GiB all-reduce
  on 8 NPUs at 300 GB/s), which the estimator's ``ideal`` fabric does not charge.
* ``endpoint-delay`` is 1 ns, the smallest ASTRA-sim runs with: at 0 its system layer schedules an
  event at the current time and the analytical backend aborts (``EventQueue.cpp``: assertion
  ``get_event_time() > current_time``; found running the exported configs). It adds ~1 ns per
  message, which the estimator does not charge (< 0.2 % at 1 MiB on 64 NPUs; see
  ``validation/astrasim/allreduce.csv``). Nor is its integer-nanosecond rounding of every message.

:func:`ring_all_reduce_ns` is that backend's formula composed with ASTRA-sim's ring all-reduce
(``2(n-1)`` messages of ``M / (n k)`` bytes per chunk, chunks in sequence); tests check the
estimator's ``ideal`` / ``ring`` fabrics against it with one and with several chunks.
Checked against ASTRA-sim itself (analytical congestion-unaware backend built from astra-sim
@c459ab6, run on what ``estimator export`` writes): ``validation/astrasim/allreduce.csv``,
``benchmarks/astrasim_compare.py``, :mod:`estimator.workloads.astrasim_compare`.

Collective sizes (Chakra ``comm_size``, written by :mod:`estimator.workloads.importers.chakra`
through :func:`comm_size`): ASTRA-sim reads it as the buffer each rank *puts in*
(``Ring.cc``: an all-gather of ``comm_size`` sends messages of ``comm_size`` and ends with
``comm_size x n``; all-reduce, reduce-scatter and all-to-all move ``comm_size / n`` per message).
The estimator's ``comm_bytes`` follows nccl-tests (an all-gather's size is the gathered output),
so an all-gather is written as ``comm_bytes / n`` and read back x n. Writing ``comm_bytes`` made
ASTRA-sim run an all-gather n times too large (7.4x the estimator on 8 NPUs, 15x on 16; found
running the exported configs). Other collectives are written as they are.

``npus_count`` is the workload's device count (ASTRA-sim needs exactly one ET file per NPU), so
``fabric.nodes`` is not used: the fabric contributes its technology parameters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError

GIB = 2**30  # ASTRA-sim's "GB" (input-format docs: 1 GB = 2^30 B)
# local-mem-bw (GB/s, x 1e9 in Sys.cc) for "reductions free": PacketBundle.cc truncates each of its three
# size / local_mem_bw terms to whole nanoseconds, and 2^40 B (a 1 TiB message) / 1e22 B/s = 0.11 ns -> 0.
FREE_LOCAL_MEM_GBPS = 1.0e13
REDUCTION_ACCESSES = 3  # PacketBundle.cc: a reduced message is written once and read twice
TOPOLOGY = {"ideal": "Switch", "ring": "Ring", "nvlink_leafspine": "Switch"}

# ASTRA-sim system-layer knobs: the stock single-dimension system template that ASTRA-sim's
# documentation ("Argument ${SYSTEM_CONFIG}", astra-sim-docs) and public example configs use --
# LIFO scheduling, 1 active chunk per dimension, ring all-reduce/all-gather/reduce-scatter, direct
# all-to-all, local memory bandwidth 1600 GB/s -- except: dataset splits = the fabric's `chunks`
# (the template has 4), endpoint delay 1 ns (the template has 10 ns) and local-mem-bw from the fabric
# (local_mem_gbps), so both sides price the same.
SYSTEM_DEFAULTS: dict[str, Any] = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 1,  # ns; the stock template has 10; 0 aborts ASTRA-sim (module docstring)
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 1,  # replaced by the fabric's `chunks` (see system_config)
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["direct"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,  # replaced by local_mem_gbps(fabric)
    "boost-mode": 0,
}


def comm_size(collective: str, comm_bytes: float, group_size: int) -> int:
    """Chakra ``comm_size`` (ASTRA-sim: bytes each rank puts in) for an estimator collective."""
    per_rank = comm_bytes / group_size if collective == "all_gather" and group_size > 0 else comm_bytes
    return int(round(per_rank))


def comm_bytes_of(collective: str, size: int, group_size: int) -> float:
    """Inverse of :func:`comm_size`: the estimator's ``comm_bytes`` of a Chakra ``comm_size``."""
    return float(size * group_size) if collective == "all_gather" else float(size)


def _param(fabric: dict[str, Any], key: str) -> float:
    value = fabric.get(key, 0.0 if key == "alpha_s" and fabric.get("name") == "ring" else None)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise EstimatorError(f"fabric.{key}: ASTRA-sim export needs a non-negative number, got {value!r}")
    return float(value)


def link_parameters(fabric: dict[str, Any], npus: int | None = None) -> tuple[str, float, float]:
    """(ASTRA-sim topology, bandwidth bytes/s, per-hop latency s) equivalent to ``fabric`` (on ``npus``
    NPUs, when the fabric's equivalence depends on it)."""
    name = str(fabric.get("name", ""))
    if name not in TOPOLOGY:
        raise EstimatorError(f"fabric {name!r} has no ASTRA-sim equivalent; export supports "
                             f"{', '.join(sorted(TOPOLOGY))} (set fabric=ideal or export.astrasim=false)")
    if name == "ideal":
        return TOPOLOGY[name], _param(fabric, "bandwidth_Bps"), _param(fabric, "alpha_s") / 2
    if name == "nvlink_leafspine":
        _one_nvlink_node(fabric, npus)
        per_message = _param(fabric, "alpha_s") + _param(fabric, "switch_latency_s")
        return TOPOLOGY[name], _param(fabric, "nvlink_bandwidth_Bps"), per_message / 2
    return TOPOLOGY[name], _param(fabric, "link_bandwidth_Bps"), _param(fabric, "alpha_s") + _param(fabric, "link_latency_s")


def _one_nvlink_node(fabric: dict[str, Any], npus: int | None) -> None:
    """``nvlink_leafspine`` is one ASTRA-sim Switch only inside one NVLink node and with its alpha-beta
    model (the NCCL model's protocols and channels have no ASTRA-sim equivalent)."""
    if fabric.get("latency_model", "nccl") != "alpha":
        raise EstimatorError(f"fabric.latency_model={fabric.get('latency_model', 'nccl')}: only the alpha model of "
                             "nvlink_leafspine has an ASTRA-sim equivalent (set fabric.latency_model=alpha)")
    per_node = fabric.get("gpus_per_node")
    if npus is not None and isinstance(per_node, int) and npus > per_node:
        raise EstimatorError(f"nvlink_leafspine: {npus} devices span several NVLink nodes (gpus_per_node="
                             f"{per_node}); ASTRA-sim export supports one node (a Switch)")


HOW = {"ideal": "alpha_s / 2: a Switch charges 2 hops per message",
       "nvlink_leafspine": "(alpha_s + switch_latency_s) / 2: a Switch charges 2 hops per message",
       "ring": "alpha_s + link_latency_s per hop"}


def network_config(fabric: dict[str, Any], npus: int) -> str:
    topology, bandwidth, latency = link_parameters(fabric, npus)
    splits(fabric)  # refuse what ASTRA-sim cannot express before anything is written
    return (f"# ASTRA-sim analytical network: estimator fabric {fabric.get('name')!r}\n"
            f"topology: [ {topology} ]\n"
            f"npus_count: [ {npus} ]\n"
            f"bandwidth: [ {bandwidth / GIB:.6f} ]  # GB/s (1 GB = 2^30 B) = {bandwidth} B/s\n"
            f"latency: [ {latency * 1e9:.3f} ]  # ns = {HOW[str(fabric['name'])]}\n")


def splits(fabric: dict[str, Any]) -> int:
    """ASTRA-sim ``preferred-dataset-splits`` for the fabric's chunking."""
    if float(fabric.get("chunk_bytes") or 0.0) > 0:
        raise EstimatorError("fabric.chunk_bytes has no ASTRA-sim equivalent (it splits by count); set fabric.chunks")
    chunks = fabric.get("chunks", 1)
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise EstimatorError(f"fabric.chunks must be a positive integer, got {chunks!r}")
    return chunks


def local_mem_gbps(fabric: dict[str, Any]) -> float:
    """ASTRA-sim ``local-mem-bw`` charging a reduction what the fabric's ``memory_bandwidth_Bps`` does."""
    rate = _param({"memory_bandwidth_Bps": 0.0, **fabric}, "memory_bandwidth_Bps")
    return REDUCTION_ACCESSES * rate / 1e9 if rate > 0 else FREE_LOCAL_MEM_GBPS


def system_config(fabric: dict[str, Any]) -> dict[str, Any]:
    return {**SYSTEM_DEFAULTS, "preferred-dataset-splits": splits(fabric), "local-mem-bw": local_mem_gbps(fabric)}


def ring_all_reduce_ns(npus: int, nbytes: float, bandwidth_GBps: float, latency_ns: float, hops: int,
                       splits: int = 1) -> float:
    """ASTRA-sim's analytical time (ns) of a one-dimension ring all-reduce of ``nbytes`` with the
    ``network.yml`` values ``bandwidth_GBps`` (1 GB = 2^30 B) and ``latency_ns``: per chunk 2(n-1)
    messages of M / (n k) bytes to a neighbour, each ``hops x latency + size / bandwidth`` (network
    backend; ``hops`` = 2 on a Switch, 1 on a Ring), chunks one after another."""
    if npus < 2:
        return 0.0
    bytes_per_ns = bandwidth_GBps * GIB / 1e9  # astra-network-analytical bw_GBps_to_Bpns
    per_message = hops * latency_ns + nbytes / (npus * splits) / bytes_per_ns
    return splits * 2 * (npus - 1) * per_message


def write_configs(fabric: dict[str, Any], npus: int, out_dir: Path, write: Any) -> list[str]:
    """Write the three configs with ``write(path, bytes)`` (atomic); return their paths."""
    files = {
        "network.yml": network_config(fabric, npus).encode(),
        "system.json": json.dumps(system_config(fabric), indent=2).encode(),
        "remote_memory.json": json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}, indent=2).encode(),
    }
    out = []
    for name, data in files.items():
        write(out_dir / name, data)
        out.append(str(out_dir / name))
    return out
