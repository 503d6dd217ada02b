"""How NCCL runs a collective: algorithms x protocols, channels, pipelining, and its tuner's choice.

The model follows NCCL's own cost model, ``src/graph/tuning.cc`` of NCCL **v2.18.5-1** (the
version of the 8-GPU measurements in ``validation/nccl_tests.csv``; the multi-node H100 rows ran
v2.26.2, whose chunk sizes item 3 below uses; read at
github.com/NVIDIA/nccl tag v2.18.5-1, lines 56-107 for the constants, 157-243 for bandwidths and
latencies, 373-397 for ``ncclTopoGetAlgoTime``), with four additions NCCL's tuner does not have.

Per (collective, algorithm, protocol) on ``n`` ranks, ``N`` nodes of ``ppn = n / N`` GPUs:

* **Bandwidth** (bus bandwidth, then algorithm bandwidth). NCCL's ``nChannels x bwIntra`` is our
  *achievable* per-GPU intra-node bandwidth ``intra_Bps`` (spec rate x the link technology's
  achievable fraction, :data:`LINK_EFFICIENCY`); across nodes (``N > 1``) the ring and tree run
  at ``min(intra_Bps, inter_Bps)`` where ``inter_Bps`` is the node's achievable NIC bandwidth
  (a ring or tree channel enters and leaves each node once, so the node's NICs, not a GPU's
  share, bound it; NCCL's tuner itself uses the intra-node rate up to two nodes). LL is capped at
  llMaxBw (by GPU generation on one node, by CPU vendor across nodes). Then tuning.cc's refinements: ring LL = min(llMaxBw, 0.5 B); ring LL128 =
  min(0.92 B, channels x perChMaxRingLL128Bw); tree = min(0.92 B, channels x perChMaxTreeBw),
  tree LL /3.8 (<= llMaxBw), tree LL128 x 7/9 on one node (120/128 across nodes, <=
  channels x perChMaxTreeLL128Bw). Bus -> algorithm bandwidth: ring x n / nsteps
  (nsteps = 2(n-1) all-reduce, n-1 reduce-scatter/all-gather, n broadcast/reduce); tree x 0.5;
  CollNet (chain) x 0.5 of the intra-node bandwidth and at most 0.9 x the node's NICs (the SHARP
  switch reduces, so a node sends and receives M once; 0.9 = newer tuning.cc's CollNet bwInter
  factor); NVLS (NVLink SHARP, one node) x 5/6 (tuner) or the calibrated ``nvls_efficiency``
  (executed time); NVLS-tree (NVLS inside
  nodes, trees between them) x 0.70 N / (2(N-1)) of the inter-node bandwidth.
* **Latency**: ``baseLat[algo][proto]`` + per-step hardware latencies ``hwLat[NVLINK|PCI|NET]``:
  ring (nsteps - nInterSteps) x intra + nInterSteps x inter (nInterSteps = 2N all-reduce, N-1
  reduce-scatter/all-gather; inter-node steps at least NCCL's 1 us NIC post overhead, x3 for
  Simple); tree 2((ppn-1) intra + log2(N) inter); NVLS base only (+ NET NVLS on several nodes);
  NVLS-tree + 2(N-1) NET; CollNet chain 2(ppn-1) intra + NET. Ring Simple all-reduce across
  nodes x1.4 (x1.9 before Ampere) once a channel has >= 64 B per rank ("plateau effect").
  Tree bandwidth x ``treeCorrectionFactor[proto][log2(M/64)]`` (NCCL's medium-size fudge).
* **Time** (NCCL's tuner): ``latency + M / algbw``. ``algorithm=auto`` picks the (algorithm,
  protocol) with the smallest tuner time, as ``ncclTopoGetAlgoInfo`` does.

Additions (not in NCCL's tuner; they make the *executed* time, which is what we report):

1. **Achievable link bandwidth** (:data:`LINK_EFFICIENCY`) instead of 100 % of spec: NVLink per
   link 20 GB/s (V100, A100) / 20.6 GB/s (H100) of 25 GB/s spec = NCCL ``src/graph/topo.h``
   ``SM70/SM80/SM90_NVLINK_BW`` -- the rates NCCL's topology search itself assumes; PCIe Gen3 x16
   12 of 15.75 GB/s (``PCI_BW``); InfiniBand NDR 46-48 of 50 GB/s per NIC (NVIDIA, nccl-tests
   issue #290: "For NDR @ 400Gbps you should see 46-48GB/s per NIC"), used for HDR/EDR/RoCE too
   (same ConnectX RDMA path; no separate public NCCL figure found).
2. **Pipeline fill inside one node.** NCCL moves data through its ring/tree as a store-and-forward
   pipeline of slices (per channel ``NCCL_BUFFSIZE / NCCL_STEPS`` bytes: 4 MiB / 8 for Simple). The
   first slice must cross every stage before the pipeline runs full, so the executed time adds
   ``(depth - 1) x min(pipeline_bytes, M / segments) / busBw`` -- depth = nsteps for a ring
   (segments = n), 4 for NVLS (scatter, multimem reduce, multimem broadcast, gather; segments =
   n). In one node only for rings and NVLS (one-node trees carry NCCL's ``treeCorrectionFactor``
   and are left as the tuner has them). The executed NVLS latency is ``nvls_latency_s``
   (calibrated) instead of the tuner's 23 us. ``pipeline_bytes`` (bytes in flight per stage
   summed over channels, for Simple; LL and LL128 scale it by their per-step data size,
   :data:`STEP_DATA_BYTES`) is fitted to measurements (see ``conf/system/*.yaml``; calibration
   rows in validation/nccl_tests.csv). This is what makes medium sizes (1-256 MiB) slower than
   ``latency + M / bw`` predicts.
3. **Pipeline fill of trees across nodes** (``tree`` and ``nvls_tree`` all-reduce, ``N > 1``):
   the same term, ``(depth - 1) x min(stage, M) / busBw``, with NCCL's own chunk size as the stage
   (:func:`cross_node_stage_bytes`, ``calcCollChunking`` of NCCL **v2.26.2-1**, the version of
   the multi-node H100 rows; no fitted constant) and the schedule's depth (:func:`depth`: a tree
   goes up ppn-1 NVLink hops and log2 N network hops and back down, 2(ppn - 1 + log2 N) stages;
   an NVLS-tree scatters and multimem-reduces in the node, crosses log2 N network hops up and
   down, and multimem-broadcasts, 2 + 2 log2 N). An NVLS-tree moves ``16 channels x heads``
   chunks of <= 128 KiB at once (16 MiB per stage on a node of 8 NICs; NCCL halves the chunk
   for small messages), so a mid-size message is only a few stages long and the fill is a large
   part of its time (2 nodes, 16 MiB = two 8 MiB stages: fill 3 x 8 MiB / 371 GB/s = 68 us of
   194 us; tree LL128 at 1 MiB, 16 channels x 18 KB stages: 15 x 0.29 MB / 320 GB/s = 14 us).
   The stage time at bus bandwidth (as in item 2) was checked on one row,
   h100x16-allreduce-64MiB (role calibration for this choice; no constant fitted). Rings across
   nodes get no fill: NCCL's x1.4 "plateau" latency already covers them, and a fill growing with
   2(n-1) stages made a 24-GPU ring 40 % too slow (validation row a100x24-allreduce-peak, role
   calibration for this choice). CollNet has no measurement here to check a fill term against.
4. **Explicit chunking** (``chunks`` / ``chunk_bytes``): the collective is cut into chunks run
   one after another, each paying the full latency -- ASTRA-sim's ``preferred-dataset-splits``
   with one active chunk; see :meth:`estimator.fabrics.library.LibraryFabric.chunking`.

**LL128 across nodes** (:func:`available`): NCCL enables LL128 only where it is tested. Across
nodes the deciding path is the one from a GPU to the NIC its ring or tree uses (``typeInter``):
LL128 runs when that path is at most PXB (PCIe switches only), or, on Hopper, at most PXN (a
peer GPU's NIC reached over NVLink) -- ``src/graph/tuning.cc`` v2.18.5-1 l.285 and v2.26.2-1
l.429 (``typeInter <= PATH_PXB || (minCompCap >= 90 && typeInter <= PATH_PXN)``), v2.27.3-1 l.460
(PXN, or P2C with ``NCCL_LL128_C2C``), v2.28.9-1 l.482-487 (PXN with ``NCCL_LL128_C2C=1``, the
default, else PXB). Nothing there singles out all-gather or reduce-scatter: on a DGX (each GPU
behind the same PCIe switch as its NIC, PXB) NCCL's tuner does pick ring LL128 for a large
all-gather across many nodes, as this model does. The path is ``gpu_nic_path`` of the system
(``pix | pxb | pxn | phb | sys``; PHB and SYS -- through the CPU -- turn LL128 off across nodes).

**NCCL version** (``version``, e.g. ``"2.18.5"``): the executed NVLS latency of one node differs
between NCCL 2.18 and 2.19+ (the 2.19 release reworked collective enqueue and NVLS buffer
handling: ``src/enqueue.cc`` changed in 1,500 lines between v2.18.5-1 and v2.20.5-1; the
tuner's NVLS latency stayed 23 us, baseLat 23 in v2.18.5-1 l.58, hwLat[NVLINK][NVLS] 23 in
v2.20.5-1 l.69), so each family has its own calibrated value: ``nvls_latency_s`` (<= 2.18) and
``nvls_latency_v219_s`` (>= 2.19), see conf/fabric/nvlink_leafspine.yaml for the rows they were
fitted on. The tuner constants above stay those of v2.18.5 for every version.

NCCL's all-to-all, gather and point-to-point are not collectives of this model (NCCL runs them
as grouped send/recv); fabrics price them on their topology.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from estimator.errors import EstimatorError

PROTOCOLS = ("ll", "ll128", "simple")
ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "collnet")
ARCHS = ("volta", "ampere", "hopper")
# algorithms with a pipeline-fill term (module docstring, item 2): inside one node, with the
# calibrated stage size; across nodes, with NCCL's own chunk size (item 3)
FILL_ALGORITHMS = ("ring", "nvls")
CROSS_NODE_FILL_ALGORITHMS = ("tree", "nvls_tree")

# NCCL v2.18.5 tuning.cc l.56-59: baseLat[algo][LL, LL128, Simple], microseconds
BASE_LAT_US = {
    "tree": (6.8, 14.0, 0.0), "ring": (6.6, 14.0, 8.4), "collnet": (6.8, 14.0, 0.0),
    "nvls": (0.0, 0.0, 23.0), "nvls_tree": (0.0, 0.0, 23.0),
}
# tuning.cc l.65-78: hwLat[NVLINK|PCI|NET][algo][LL, LL128, Simple], microseconds
# (collnet = CollNetChain; NVLS/NVLS-tree have no intra-node per-step term)
HW_LAT_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet": (0.0, 0.0, 4.75),
               "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0)},
    "pci": {"tree": (1.0, 1.9, 6.0), "ring": (1.0, 2.5, 5.7), "collnet": (0.0, 0.0, 8.0),
            "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "collnet": (0.0, 0.0, 14.0),
            "nvls": (0.0, 0.0, 18.0), "nvls_tree": (0.0, 0.0, 19.0)},
}
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}  # getNetOverhead(): per inter-node ring step (x3 for Simple)
CPUS = tuple(NET_OVERHEAD_US)
NVLS_TUNER_RATIO = 5.0 / 6.0  # tuning.cc l.197: NVLS bus -> algorithm bandwidth (the tuner's view)
# tuning.cc l.86-90, GB/s, [row][0 if one node, 1 if two, 2 if more]; the row is the GPU generation
# on one node ("Volta-N1/Intel-N2/Intel-N4", "Ampere-N1/AMD-N2/AMD-N4", "Hopper-N1/AMD-N2/AMD-N4")
# and the CPU vendor across nodes (Intel -> the Volta row, AMD -> the Ampere row)
LL_MAX_BW = {"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0), "hopper": (87.7, 22.5, 19.0)}
# tuning.cc l.92-106, GB/s per channel, [arch][0 if one node, 1 if two, 2 if more]
PER_CH_RING_LL128 = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0), "hopper": (36.7, 36.7, 36.7)}
PER_CH_TREE_LL128 = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0), "hopper": (36.7, 36.7, 29.0)}
PER_CH_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0)}
# tuning.cc l.373-379: tree bandwidth correction per protocol, index log2(bytes / 64), 0..22
TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}
# Achievable fraction of a link's spec rate per direction (see the module docstring, item 1).
LINK_EFFICIENCY = {
    "nvlink2": 20.0 / 25.0,   # NCCL topo.h SM70_NVLINK_BW 20 GB/s per 25 GB/s NVLink2 link
    "nvlink3": 20.0 / 25.0,   # NCCL topo.h SM80_NVLINK_BW 20 GB/s per 25 GB/s NVLink3 link
    "nvlink4": 20.6 / 25.0,   # NCCL topo.h SM90_NVLINK_BW 20.6 GB/s per 25 GB/s NVLink4 link
    "pcie3": 12.0 / 15.75,    # NCCL topo.h PCI_BW 12 GB/s for Gen3 x16 (15.75 GB/s)
    "pcie4": 24.0 / 31.5,     # NCCL 2.18 topo.h PCI_BW scaled to Gen4 x16 (same fraction)
    "ib_ndr": 47.0 / 50.0,    # nccl-tests issue #290 (NVIDIA): 46-48 GB/s per 400 Gb/s NDR NIC
    "ib_hdr": 47.0 / 50.0,    # same ConnectX RDMA path as NDR (assumption, no separate figure)
    "ib_edr": 47.0 / 50.0,    # idem
    "roce": 47.0 / 50.0,      # idem (lossless RoCE v2 on ConnectX)
    # Omni-Path 100 (Intel OPA) as NCCL drove it through verbs (NET/IB, no net plugin), measured on Jean
    # Zay's A100 partition (4 nodes x 8 A100-80GB, 4 OPA links per node, NCCL 2.10.3): a 4 GB fp32
    # all-reduce over 32 GPUs took 1.527 s (mean of the 4 steady trials x 32 ranks, trial 0 with
    # connection set-up left out) = busbw 5.08 GB/s. The log shows NCCL built 2 channels ("Channel 00/02")
    # that left each node through one HFI (send via NET/IB/3, receive via NET/IB/1): one link's rate, 0.41 of
    # its 12.5 GB/s (the fabric states it: ring_uplinks=1).
    # bigscience-workshop/bigscience@358e3c8 experiments/bandwidth/all_reduce_bench-a100-n4.txt (2022-01-28;
    # README: "we have an issue with nccl that doesn't fully utilize Intel OPA full bandwidth").
    # Calibration row jeanzay-a100x32-allreduce-4GB (validation/nccl_tests.csv): this ratio reproduces it.
    "opa": 0.4064,
    "ideal": 1.0,
}


# Data bytes per channel per pipeline step (NCCL src/init.cc DEFAULT_*_BUFFSIZE / NCCL_STEPS 8;
# src/include/device.h): LL 8 lines x 512 threads x 16 B, half of it flags; LL128 120 elements x
# 640 threads x 8 B, 15 of 16 words data; Simple 4 MiB. The fill term scales ``pipeline_bytes``
# (Simple) by these ratios.
STEP_DATA_BYTES = {"ll": 8 * 512 * 16 / 2, "ll128": 120 * 640 * 8 * 15 / 16, "simple": 4 * 2**20 / 8}
# NCCL v2.26.2-1 src/transport/nvls.cc l.144 NVLS_NCHANNELS_SM90 (Hopper NVLS channels) and l.149
# NCCL_NVLS_CHUNKSIZE default 128 KiB; src/enqueue.cc l.1895 NVLS-tree chunk cap 64 KiB from 4 nodes on
NVLS_CHANNELS_SM90 = 16
NVLS_CHUNK_BYTES = 128 * 1024
NVLS_TREE_MAX_CHUNK_4_NODES = 64 * 1024
# GPU -> NIC path types, closest first (NCCL src/graph/topo.h PATH_PIX ... PATH_SYS; PXN = a peer
# GPU's NIC over NVLink, ranked between PXB and PHB as in topo.h)
GPU_NIC_PATHS = ("pix", "pxb", "pxn", "phb", "sys")
# First NCCL release with the reworked enqueue / NVLS path (module docstring, "NCCL version")
NVLS_REWORK_VERSION = (2, 19)


def parse_version(text: str) -> tuple[int, int]:
    """(major, minor) of an NCCL version such as ``"2.18.5"``, ``"2.26"`` or ``"2.20.5-1"``."""
    parts = str(text).split("-")[0].split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        raise EstimatorError(f"NCCL version must look like 2.18.5, got {text!r}") from None
    if major < 2 or minor < 0:
        raise EstimatorError(f"NCCL version must be 2.x (the tuner constants are NCCL 2's), got {text!r}")
    return major, minor


def ll128_across_nodes(arch: str, gpu_nic_path: str) -> bool:
    """Whether NCCL enables LL128 between nodes for this GPU -> NIC path (module docstring)."""
    rank = GPU_NIC_PATHS.index(gpu_nic_path)
    return rank <= GPU_NIC_PATHS.index("pxb") or (arch == "hopper" and rank <= GPU_NIC_PATHS.index("pxn"))


def tier(nodes: int) -> int:
    return 0 if nodes <= 1 else 1 if nodes == 2 else 2


@dataclass(frozen=True)
class NcclSystem:
    """What NCCL's tuner sees of a group: ranks, nodes, GPU generation, achievable bandwidths."""

    ranks: int
    nodes: int
    arch: str = "hopper"
    intra_Bps: float = 370.8e9       # achievable per-GPU NVLink bandwidth, per direction
    inter_Bps: float = 400e9 * 0.94  # achievable NIC bandwidth of one node, per direction
    intra_link: str = "nvlink"       # nvlink | pci (hwLat row inside a node)
    channels: int = 16
    nvls: bool = False               # NVLink SHARP (NVSwitch gen3 + Hopper)
    collnet: bool = False            # IB SHARP (CollNet) between nodes
    nvls_efficiency: float = 5.0 / 6.0
    pipeline_bytes: float = 0.0      # bytes in flight per pipeline stage (0 = no fill term)
    nvls_latency_s: float = 23e-6    # executed NVLS latency (NCCL 2.18 tuner: baseLat 23 us)
    cpu: str = "intel"               # intel | amd: NCCL's LL cap and NIC post overhead across nodes
    nics: int = 8                    # NICs per node: NVLS heads across nodes (one per NIC, at most ppn)
    gpu_nic_path: str = "pxb"        # GPU -> NIC path (GPU_NIC_PATHS): LL128 across nodes or not

    def ll_max_Bps(self) -> float:
        row = self.arch if self.nodes == 1 else {"intel": "volta", "amd": "ampere"}[self.cpu]
        return LL_MAX_BW[row][tier(self.nodes)] * 1e9

    @property
    def ppn(self) -> int:
        return self.ranks // self.nodes


def _nsteps(coll: str, n: int) -> int:
    return 2 * (n - 1) if coll == "all_reduce" else n - 1 if coll in ("reduce_scatter", "all_gather") else n


def _p(proto: str) -> int:
    return PROTOCOLS.index(proto)


def available(coll: str, algo: str, proto: str, s: NcclSystem) -> bool:
    """Whether NCCL 2.18 would run ``algo``/``proto`` for ``coll`` on this system."""
    if coll not in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"):
        return False
    if algo != "ring" and coll != "all_reduce":
        return False
    if algo in ("nvls", "nvls_tree", "collnet") and proto != "simple":
        return False
    if algo == "nvls":
        return s.nvls and s.nodes == 1 and s.ranks > 1
    if algo == "nvls_tree":
        return s.nvls and s.nodes > 1
    if algo == "collnet":
        return s.collnet and s.nodes > 1
    if proto == "ll128" and s.intra_link != "nvlink":
        return False  # LL128 needs NVLink (tuning.cc: enabled only up to PATH_NVB on NVLink systems)
    if proto == "ll128" and s.nodes > 1 and not ll128_across_nodes(s.arch, s.gpu_nic_path):
        return False  # tuning.cc: typeInter beyond PXB (PXN on Hopper) -- module docstring
    return True


def bus_bandwidth(coll: str, algo: str, proto: str, s: NcclSystem) -> float:
    """NCCL's bus bandwidth of one (algorithm, protocol), bytes/s."""
    t = tier(s.nodes)
    base = s.intra_Bps if s.nodes == 1 or algo in ("nvls", "collnet") else min(s.intra_Bps, s.inter_Bps)
    ch = s.channels
    if algo == "ring":
        if proto == "ll":
            return min(s.ll_max_Bps(), 0.5 * base)
        if proto == "ll128":
            return min(0.92 * base, ch * PER_CH_RING_LL128[s.arch][t] * 1e9)
        return base
    if algo == "tree":
        bw = min(0.92 * base, ch * PER_CH_TREE[s.arch][t] * 1e9)
        if proto == "ll":
            return min(bw / 3.8, s.ll_max_Bps())
        if proto == "ll128":
            return min(bw * (7.0 / 9.0 if s.nodes == 1 else 120.0 / 128.0), ch * PER_CH_TREE_LL128[s.arch][t] * 1e9)
        return bw
    if algo == "nvls":
        return base
    if algo == "nvls_tree":
        return min(s.intra_Bps, s.inter_Bps)
    return base  # collnet: NCCL uses the intra-node graph's bandwidth (the NIC bound is on algbw)


def alg_bandwidth(coll: str, algo: str, proto: str, s: NcclSystem, executed: bool = False) -> float:
    """Algorithm bandwidth, bytes/s: NCCL's tuner view, or (``executed``) with the calibrated NVLS
    efficiency in place of the tuner's 5/6."""
    bus = bus_bandwidth(coll, algo, proto, s)
    if algo == "ring":
        return bus * s.ranks / _nsteps(coll, s.ranks)
    if algo == "nvls":
        return bus * (s.nvls_efficiency if executed else NVLS_TUNER_RATIO)
    if algo == "nvls_tree":
        return bus * 0.70 * s.nodes / (2 * (s.nodes - 1))
    if algo == "collnet":  # each node sends and receives M once through its NICs (switch reduces)
        return min(bus * 0.5, 0.9 * s.inter_Bps)
    return bus * 0.5


def latency(coll: str, algo: str, proto: str, s: NcclSystem) -> float:
    """NCCL's latency of one (algorithm, protocol), seconds."""
    p = _p(proto)
    lat = BASE_LAT_US[algo][p]
    intra = HW_LAT_US[s.intra_link][algo][p]
    inter = HW_LAT_US["net"][algo][p]
    n, nodes = s.ranks, s.nodes
    if algo == "ring":
        nsteps = _nsteps(coll, n)
        if coll in ("broadcast", "reduce"):
            hw = HW_LAT_US[s.intra_link if nodes == 1 else "net"]
            lat += nsteps * hw["tree" if proto == "simple" else "ring"][p]
        else:
            inter_steps = (2 * nodes if nodes > 1 else 0) if coll == "all_reduce" else nodes - 1
            inter_steps = min(inter_steps, nsteps)
            if nodes > 1:
                intra = max(intra, NET_OVERHEAD_US[s.cpu] * (3 if proto == "simple" else 1))
            lat += (nsteps - inter_steps) * intra + inter_steps * inter
    elif algo == "tree":
        lat += 2 * ((s.ppn - 1) * intra + int(math.log2(nodes)) * inter)
    elif algo == "nvls":
        lat += inter if nodes > 1 else 0.0
    elif algo == "nvls_tree":
        lat += 2 * (nodes - 1) * inter
    else:  # collnet chain
        lat += 2 * (s.ppn - 1) * intra + inter
    return lat * 1e-6


def _tree_factor(proto: str, nbytes: float) -> float:
    log_size = int(nbytes) >> 6
    log_size = log_size.bit_length() - 1 if log_size > 0 else -1
    table = TREE_CORRECTION[proto]
    return table[log_size] if 0 <= log_size < len(table) else 1.0


def tuner_time(coll: str, algo: str, proto: str, s: NcclSystem, nbytes: float, executed: bool = False) -> float:
    """``ncclTopoGetAlgoTime``: NCCL's own estimate, seconds (inf when not available)."""
    if not available(coll, algo, proto, s):
        return math.inf
    bw = alg_bandwidth(coll, algo, proto, s, executed)
    lat = latency(coll, algo, proto, s)
    if executed and algo == "nvls":  # the executed NVLS latency replaces the tuner's base latency
        lat += s.nvls_latency_s - BASE_LAT_US["nvls"][2] * 1e-6
    if algo == "tree":
        bw *= _tree_factor(proto, nbytes)
    if (algo == "ring" and proto == "simple" and s.nodes > 1 and coll == "all_reduce"
            and nbytes / (s.channels * s.ranks) >= 64):
        lat *= 1.9 if s.arch == "volta" else 1.4
    return lat + nbytes / bw


def depth(coll: str, algo: str, s: NcclSystem) -> tuple[int, int]:
    """(pipeline stages, segments the buffer is cut into) of the executed schedule."""
    if algo == "ring":
        return _nsteps(coll, s.ranks), s.ranks
    if algo == "tree":
        return 2 * (s.ppn - 1 + max(1, int(math.log2(s.nodes)) if s.nodes > 1 else 0)), 1
    if algo == "nvls":  # scatter, multimem reduce, multimem broadcast, gather
        return 4, s.ranks
    if algo == "nvls_tree":
        return 2 + 2 * max(1, int(math.log2(s.nodes))), s.ranks
    return 2 * s.ppn, s.ranks  # collnet chain


def cross_node_stage_bytes(algo: str, proto: str, s: NcclSystem, nbytes: float) -> float:
    """Bytes one pipeline stage of a tree across nodes moves, summed over channels (and NVLS heads):
    NCCL's chunk size, ``calcCollChunking`` of src/enqueue.cc at NCCL v2.26.2-1 (l.1890-1910).

    NVLS-tree: ``NVLS_CHANNELS_SM90 x heads`` concurrent chunks of 128 KiB (64 KiB from 4 nodes
    on), cut to 256/128/64/32 KiB below 32/16/4/1 x concurrentOps x chunk bytes (l.1897-1900).
    Tree: one protocol step per channel (:data:`STEP_DATA_BYTES`); LL128 halves it while the
    channel holds fewer than ``(1 + log2 N + 0.1 ppn) x 64 / ppn`` chunks (down to 128 KiB), then
    ``x 16 / ppn`` (down to 32 KiB) (l.1904-1909)."""
    if algo == "nvls_tree":
        ops = NVLS_CHANNELS_SM90 * max(1, min(s.ppn, s.nics))
        chunk = NVLS_CHUNK_BYTES if s.nodes < 4 else min(NVLS_CHUNK_BYTES, NVLS_TREE_MAX_CHUNK_4_NODES)
        for times, cut in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
            if nbytes < times * ops * chunk and chunk > cut:
                chunk = cut
        return ops * chunk
    chunk = int(STEP_DATA_BYTES[proto])
    if proto == "ll128":
        steps = 1 + int(math.log2(s.nodes)) + 0.1 * s.ppn
        for times, floor in ((64, 131072), (16, 32768)):
            while nbytes // (s.channels * chunk) < steps * times / s.ppn and chunk > floor:
                chunk //= 2
    return s.channels * chunk


def exec_time(coll: str, algo: str, proto: str, s: NcclSystem, nbytes: float) -> float:
    """Executed time: the tuner's formula with the calibrated NVLS constants + the pipeline fill
    (module docstring, items 2 and 3)."""
    t = tuner_time(coll, algo, proto, s, nbytes, executed=True)
    if not math.isfinite(t) or nbytes <= 0:
        return t
    stages, segments = depth(coll, algo, s)
    bus = bus_bandwidth(coll, algo, proto, s)
    if s.nodes > 1:
        if algo not in CROSS_NODE_FILL_ALGORITHMS or coll != "all_reduce":
            return t
        return t + (stages - 1) * min(cross_node_stage_bytes(algo, proto, s, nbytes), nbytes) / bus
    if s.pipeline_bytes <= 0 or algo not in FILL_ALGORITHMS:
        return t
    stage_bytes = s.pipeline_bytes * STEP_DATA_BYTES[proto] / STEP_DATA_BYTES["simple"]
    return t + (stages - 1) * min(stage_bytes, nbytes / segments) / bus


def choose(coll: str, s: NcclSystem, nbytes: float, algorithms: tuple[str, ...] = ALGORITHMS,
           protocols: tuple[str, ...] = PROTOCOLS) -> tuple[str, str]:
    """The (algorithm, protocol) NCCL's tuner picks: the smallest :func:`tuner_time`."""
    best, pick = math.inf, None
    for algo in algorithms:
        for proto in protocols:
            t = tuner_time(coll, algo, proto, s, nbytes)
            if t < best:
                best, pick = t, (algo, proto)
    if pick is None:
        raise EstimatorError(f"NCCL model: no algorithm/protocol among {algorithms} x {protocols} runs {coll} "
                             f"on {s.ranks} ranks / {s.nodes} nodes")
    return pick
