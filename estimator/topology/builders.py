"""Builders for the standard topologies. Every builder numbers endpoints 0..n-1 (= ranks)."""

from __future__ import annotations

from estimator.errors import EstimatorError
from estimator.topology.graph import Topology


def star(n: int, bandwidth_Bps: float, latency_s: float = 0.0, name: str = "star") -> Topology:
    """n endpoints on one non-blocking switch; ``latency_s`` is on the switch->endpoint link."""
    topo = Topology(name, "shortest")
    sw = topo.add_switch("switch")
    for i in range(n):
        ep = topo.add_endpoint(f"gpu{i}")
        topo.connect(ep, sw, bandwidth_Bps, 0.0, latency_s)
    return topo


def leaf_spine(
    n: int, per_leaf: int, endpoint_bw: float, spines: int, uplink_bw: float,
    leaf_latency_s: float, uplink_latency_s: float, spine_latency_s: float, name: str = "leaf_spine",
) -> Topology:
    """Endpoints in groups of ``per_leaf`` under a leaf switch; every leaf has one uplink of
    ``uplink_bw`` to each of ``spines`` spine switches; ECMP over the spines.
    Latency: ``leaf_latency_s`` on leaf->endpoint, ``uplink_latency_s`` on leaf->spine,
    ``spine_latency_s`` on spine->leaf, none on endpoint->leaf."""
    topo = Topology(name, "ecmp")
    leaves = []
    spine_nodes = [topo.add_switch(f"spine{s}") for s in range(spines if n > per_leaf else 0)]
    for i in range(n):
        if i % per_leaf == 0:
            leaf = topo.add_switch(f"leaf{i // per_leaf}")
            leaves.append(leaf)
            for sp in spine_nodes:
                topo.connect(leaf, sp, uplink_bw, uplink_latency_s, spine_latency_s)
        ep = topo.add_endpoint(f"gpu{i}")
        topo.connect(ep, leaves[-1], endpoint_bw, 0.0, leaf_latency_s)
    return topo


def ring(n: int, bandwidth_Bps: float, latency_s: float, bidirectional: bool = True, name: str = "ring") -> Topology:
    """Endpoints i -> i+1 (and i+1 -> i if bidirectional), each link ``bandwidth_Bps``."""
    topo = Topology(name, "shortest")
    eps = [topo.add_endpoint(f"node{i}") for i in range(n)]
    if n < 2:
        return topo
    pairs = [(i, (i + 1) % n) for i in range(n if n > 2 else 1)]
    for a, b in pairs:
        topo.add_link(eps[a], eps[b], bandwidth_Bps, latency_s)
    if bidirectional:
        for a, b in pairs:
            topo.add_link(eps[b], eps[a], bandwidth_Bps, latency_s)
    return topo


def torus2d(rows: int, cols: int, bandwidth_Bps: float, latency_s: float, name: str = "torus2d") -> Topology:
    """rows x cols torus (endpoint = row*cols + col), a full-duplex link to each of the four
    neighbours (a 2-long dimension has one cable, not two); dimension-order routing (X = along
    the row first, the shorter way round; ties go the positive way)."""
    topo = Topology(name, "dimension_order")
    eps = [topo.add_endpoint(f"node{r}_{c}") for r in range(rows) for c in range(cols)]
    plus: dict[tuple[int, int], int] = {}  # (node, dim) -> link to the +1 neighbour
    minus: dict[tuple[int, int], int] = {}
    for r in range(rows):
        for c in range(cols):
            me = r * cols + c
            for dim, size in ((0, cols), (1, rows)):
                if size < 2:
                    continue
                nb = r * cols + (c + 1) % cols if dim == 0 else ((r + 1) % rows) * cols + c
                if size == 2 and ((c if dim == 0 else r) == 1):
                    plus[(me, dim)] = topo.links_between(eps[me], eps[nb])[0]
                    continue
                lk = topo.connect(eps[me], eps[nb], bandwidth_Bps, latency_s)
                plus[(me, dim)] = lk
                minus[(nb, dim)] = lk + 1
    for (me, dim), lk in list(plus.items()):
        minus.setdefault((me, dim), lk)

    def router(src: int, dst: int) -> list[int]:
        path = []
        r, c = divmod(src, cols)
        r2, c2 = divmod(dst, cols)
        for dim, size in ((0, cols), (1, rows)):
            here, there = (c, c2) if dim == 0 else (r, r2)
            fwd = (there - here) % size
            step, count = (1, fwd) if fwd <= size - fwd else (-1, size - fwd)
            for _ in range(count):
                me = r * cols + c
                path.append(plus[(me, dim)] if step > 0 else minus[(me, dim)])
                if dim == 0:
                    c = (c + step) % cols
                else:
                    r = (r + step) % rows
        return path

    topo.router = router
    return topo


def fat_tree(k: int, n: int, bandwidth_Bps: float, latency_s: float, name: str = "fattree") -> Topology:
    """Three-level k-ary fat tree (Al-Fares et al. 2008): k pods of k/2 edge and k/2 aggregation
    switches, (k/2)^2 cores, k/2 hosts per edge switch, k^3/4 hosts; the first ``n`` are used.
    Every link ``bandwidth_Bps``; ``latency_s`` per switch traversal; ECMP."""
    check_fat_tree(k, n)
    half = k // 2
    topo = Topology(name, "ecmp")
    cores = [topo.add_switch(f"core{i}") for i in range(half * half)]
    host = 0
    for pod in range(k):
        if host >= n:
            break
        aggs = [topo.add_switch(f"agg{pod}_{a}") for a in range(half)]
        for a, agg in enumerate(aggs):
            for j in range(half):
                topo.connect(agg, cores[a * half + j], bandwidth_Bps, latency_s, latency_s)
        for e in range(half):
            if host >= n:
                break
            edge = topo.add_switch(f"edge{pod}_{e}")
            for agg in aggs:
                topo.connect(edge, agg, bandwidth_Bps, latency_s, latency_s)
            for _ in range(half):
                if host >= n:
                    break
                ep = topo.add_endpoint(f"host{host}")
                topo.connect(ep, edge, bandwidth_Bps, 0.0, latency_s)
                host += 1
    return topo


def check_fat_tree(k: int, n: int) -> None:
    """What :func:`fat_tree` refuses: an odd or too small k, more than k^3/4 hosts."""
    if k < 2 or k % 2:
        raise EstimatorError(f"fattree: k must be an even integer >= 2, got {k}")
    if n > k**3 // 4:
        raise EstimatorError(f"fattree: k={k} holds at most {k**3 // 4} hosts, asked for {n}")


def fat_tree_traversals(half: int, span):
    """Switch traversals on the longest route among hosts ``0 .. span-1`` of a fat tree with
    ``half`` = k/2 hosts per edge switch (1: one edge switch, 3: one pod, 5: across pods); also
    the traversals between two hosts whose aligned block is ``span`` wide. Scalar or array."""
    import numpy as np

    span = np.asarray(span)
    out = np.where(span <= half, 1, np.where(span <= half * half, 3, 5))
    return int(out) if out.ndim == 0 else out


def fat_tree_pair_traversals(half: int, src, dst):
    """Switch traversals on a shortest route from host ``src`` to host ``dst`` (arrays): 1 under
    one edge switch, 3 in one pod, 5 across pods (0 for src == dst)."""
    import numpy as np

    src, dst = np.asarray(src), np.asarray(dst)
    return np.where(src == dst, 0, np.where(src // half == dst // half, 1,
                                            np.where(src // (half * half) == dst // (half * half), 3, 5)))


def bcube(radix: int, levels: int, port_bw: float, latency_s: float, name: str = "bcube") -> Topology:
    """BCube(r, l) with ``levels`` = l+1 (Guo et al. 2009): r^levels servers, each with one port
    per level to an r-port switch joining the servers that differ only in that level's digit.
    Servers relay; ECMP over equal-hop digit-correction orders."""
    n = radix**levels
    topo = Topology(name, "ecmp")
    eps = [topo.add_endpoint(f"server{i}") for i in range(n)]
    for lvl in range(levels):
        stride = radix**lvl
        for base in range(n):
            if (base // stride) % radix:
                continue
            sw = topo.add_switch(f"sw{lvl}_{base}")
            for j in range(radix):
                topo.connect(eps[base + j * stride], sw, port_bw, 0.0, latency_s)
    return topo


def rail_optimized(n: int, per_node: int, nvlink_bw: float, nic_bw: float, latency_s: float,
                   name: str = "rail_optimized") -> Topology:
    """DGX-style servers: ``per_node`` GPUs on a node switch (``nvlink_bw``); GPU i of every server
    on rail switch i (``nic_bw``); rails joined by one spine whose rail links carry the rail's whole
    capacity. ``latency_s`` on every link leaving a switch; ECMP."""
    topo = Topology(name, "ecmp")
    servers = -(-n // per_node)
    rails = [topo.add_switch(f"rail{i}") for i in range(min(per_node, n))] if servers > 1 else []
    if len(rails) > 1:
        spine = topo.add_switch("spine")
        for rail in rails:
            topo.connect(rail, spine, nic_bw * servers, latency_s, latency_s)
    node_sw = None
    for g in range(n):
        if g % per_node == 0:
            node_sw = topo.add_switch(f"nvswitch{g // per_node}")
        ep = topo.add_endpoint(f"gpu{g}")
        topo.connect(ep, node_sw, nvlink_bw, 0.0, latency_s)
        if rails:
            topo.connect(ep, rails[g % per_node], nic_bw, 0.0, latency_s)
    return topo
