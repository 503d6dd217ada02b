"""A topology: endpoints, switches and directed links, with routing.

Model assumptions:

* A link is one direction of a cable: ``bandwidth_Bps`` and ``latency_s``. A full-duplex cable is
  two links (:meth:`Topology.connect`). Switch traversal time is put on the links leaving a switch.
* Routing is by hop count. ``shortest``: one deterministic shortest path (lowest link id at each
  hop). ``ecmp``: per-hop equal split over every next hop on a shortest path, so a transfer's
  bytes spread fractionally over links. ``dimension_order``: a builder-supplied router (e.g. the
  torus's X-then-Y). Endpoints may forward (BCube servers relay), switches always do.
* A route's latency is the largest latency over the paths it uses.

Routes depend on the structure only (which links join which nodes, the routing mode), not on
link numbers, so the hop distances a route search needs are kept per structure
(:data:`_SHARED_DIST`): topologies that differ only in latencies or bandwidths (e.g. two versions
of one custom file) search each destination once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from estimator.errors import EstimatorError

ROUTINGS = ("shortest", "ecmp", "dimension_order")
# distance arrays kept (oldest dropped first) hold at most this many entries in all (8 bytes each):
# keeping one per destination cost n x nodes x 8 bytes (2.4 GiB at 16k GPUs); 16M entries = 128 MB
# keeps them all up to ~2,800 GPUs and bounds memory beyond (a dropped BFS is recomputed if needed)
DIST_BUDGET = 16_000_000
# cached routes hold at most this many (link, fraction) entries in all (16 bytes each, ~256 MB),
# oldest dropped first: an all-pairs schedule on a large custom graph re-routes instead of growing
ROUTE_BUDGET = 16_000_000
# graphs with at most this many (endpoint x node) entries search every endpoint's distances at once
# on the first route (one batched BFS, ~2 MB here) instead of one BFS per destination
ALL_TARGETS_AT_ONCE = 1 << 18
# distance arrays per graph structure (a digest of routing, nodes and link ends), shared by every
# topology of that structure; each structure's arrays stay within DIST_BUDGET, and at most this
# many structures are kept (oldest dropped first)
_SHARED_DIST: dict[str, dict[int, np.ndarray]] = {}
SHARED_STRUCTURES = 2


@dataclass(frozen=True)
class Route:
    links: np.ndarray  # link ids
    fractions: np.ndarray  # share of the transfer's bytes on each link
    latency_s: float


Router = Callable[[int, int], list[int]]


class Topology:
    """Build with :meth:`add_endpoint` / :meth:`add_switch` / :meth:`connect`, then route."""

    def __init__(self, name: str = "topology", routing: str = "shortest"):
        if routing not in ROUTINGS:
            raise EstimatorError(f"topology {name!r}: routing must be one of {', '.join(ROUTINGS)}, got {routing!r}")
        self.name = name
        self.routing = routing
        self.labels: list[str] = []
        self.kinds: list[str] = []
        self.endpoints: list[int] = []
        self._src: list[int] = []
        self._dst: list[int] = []
        self._bw: list[float] = []
        self._lat: list[float] = []
        self._out: list[list[int]] = []
        self.router: Router | None = None
        self._routes: dict[tuple[int, int], Route] = {}
        self._route_entries = 0
        self._dist: dict[int, np.ndarray] = {}
        self._dist_shared = False
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._incoming: tuple[np.ndarray, np.ndarray] | None = None
        self._adj: dict[tuple[int, int], list[int]] | None = None
        self._ends: tuple[np.ndarray, np.ndarray] | None = None
        self._outs: list[tuple[np.ndarray, np.ndarray]] | None = None

    # ---- building ----------------------------------------------------------------------------
    def _add(self, kind: str, label: str | None) -> int:
        node = len(self.kinds)
        self.kinds.append(kind)
        self.labels.append(label if label is not None else f"{kind}{node}")
        self._out.append([])
        return node

    def add_endpoint(self, label: str | None = None) -> int:
        """Add an endpoint (GPU); endpoints are numbered 0.. in the order added (= ranks)."""
        node = self._add("endpoint", label)
        self.endpoints.append(node)
        return node

    def add_switch(self, label: str | None = None) -> int:
        return self._add("switch", label)

    def add_link(self, a: int, b: int, bandwidth_Bps: float, latency_s: float = 0.0) -> int:
        if not (bandwidth_Bps > 0 and np.isfinite(bandwidth_Bps)):
            raise EstimatorError(f"topology {self.name!r}: link {self.labels[a]}->{self.labels[b]} needs a "
                                 f"positive bandwidth, got {bandwidth_Bps!r}")
        if not (latency_s >= 0 and np.isfinite(latency_s)):
            raise EstimatorError(f"topology {self.name!r}: link {self.labels[a]}->{self.labels[b]} needs a "
                                 f"non-negative latency, got {latency_s!r}")
        link = len(self._src)
        self._src.append(a)
        self._dst.append(b)
        self._bw.append(float(bandwidth_Bps))
        self._lat.append(float(latency_s))
        self._out[a].append(link)
        self._arrays = None
        self._incoming = self._adj = self._outs = self._ends = None
        self._routes.clear()
        self._route_entries = 0
        self._dist, self._dist_shared = {}, False
        return link

    def connect(self, a: int, b: int, bandwidth_Bps: float, lat_ab: float = 0.0, lat_ba: float | None = None) -> int:
        """A full-duplex cable: link a->b (returned) and b->a (the next id)."""
        first = self.add_link(a, b, bandwidth_Bps, lat_ab)
        self.add_link(b, a, bandwidth_Bps, lat_ab if lat_ba is None else lat_ba)
        return first

    # ---- queries ----------------------------------------------------------------------------
    @property
    def num_endpoints(self) -> int:
        return len(self.endpoints)

    @property
    def num_links(self) -> int:
        return len(self._src)

    @property
    def bandwidth(self) -> np.ndarray:
        return self._link_arrays()[0]

    @property
    def latency(self) -> np.ndarray:
        return self._link_arrays()[1]

    def _link_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = (np.asarray(self._bw, dtype=float), np.asarray(self._lat, dtype=float))
        return self._arrays

    def link_ends(self, link: int) -> tuple[int, int]:
        return self._src[link], self._dst[link]

    def links_between(self, a: int, b: int) -> list[int]:
        return [lk for lk in self._out[a] if self._dst[lk] == b]

    def route(self, src: int, dst: int) -> Route:
        """Route from endpoint index ``src`` to endpoint index ``dst`` (cached)."""
        key = (src, dst)
        hit = self._routes.get(key)
        if hit is None:
            hit = self._routes[key] = self._compute_route(src, dst)
            self._route_entries += len(hit.links) + 1
            while self._route_entries > ROUTE_BUDGET and len(self._routes) > 1:  # bounded memory
                old = self._routes.pop(next(iter(self._routes)))
                self._route_entries -= len(old.links) + 1
        return hit

    # ---- routing ----------------------------------------------------------------------------
    def _node(self, ep: int) -> int:
        if not 0 <= ep < len(self.endpoints):
            raise EstimatorError(f"topology {self.name!r}: no endpoint {ep} (it has {len(self.endpoints)})")
        return self.endpoints[ep]

    def _compute_route(self, src: int, dst: int) -> Route:
        a, b = self._node(src), self._node(dst)
        if a == b:
            return Route(np.zeros(0, dtype=np.int64), np.zeros(0), 0.0)
        if self.routing == "dimension_order" and self.router is not None:
            path = self.router(src, dst)
            lat = float(sum(self._lat[lk] for lk in path))
            return Route(np.asarray(path, dtype=np.int64), np.ones(len(path)), lat)
        dist = self._distances_to(b)
        if dist[a] < 0:
            raise EstimatorError(f"topology {self.name!r}: endpoint {dst} is unreachable from endpoint {src}")
        # nodes on shortest paths, layer by layer from a
        layers = [[a]]
        share: dict[int, float] = {a: 1.0}
        loads: dict[int, float] = {}
        nexts: dict[int, list[int]] = {}
        for _ in range(int(dist[a])):
            layer: list[int] = []
            for u in layers[-1]:
                hops = self._next_hops(u, dist, b)
                if self.routing != "ecmp":
                    hops = hops[:1]
                nexts[u] = hops
                part = share[u] / len(hops)
                for lk in hops:
                    v = self._dst[lk]
                    loads[lk] = loads.get(lk, 0.0) + part
                    if v not in share:
                        share[v] = 0.0
                        layer.append(v)
                    share[v] += part
            layers.append(layer)
        worst: dict[int, float] = {b: 0.0}
        for layer in reversed(layers[:-1]):
            for u in layer:
                worst[u] = max(self._lat[lk] + worst[self._dst[lk]] for lk in nexts[u])
        links = np.fromiter(loads.keys(), dtype=np.int64, count=len(loads))
        fracs = np.fromiter(loads.values(), dtype=float, count=len(loads))
        return Route(links, fracs, worst[a])

    def node_of(self, ep: int) -> int:
        """Graph node of endpoint index ``ep``."""
        return self._node(ep)

    def link_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(source node, destination node) of every link."""
        if self._ends is None:
            self._ends = (np.asarray(self._src, dtype=np.int64), np.asarray(self._dst, dtype=np.int64))
        return self._ends

    def dag_to(self, ep: int) -> tuple[list[np.ndarray], np.ndarray]:
        """The routing DAG towards endpoint ``ep``: its links grouped by the hop distance of their
        source (layers[0]: sources one hop away, ...), and every node's number of next hops.
        Equal to what :meth:`route` uses (``ecmp``: all next hops; ``shortest``: the lowest id)."""
        if self.routing == "dimension_order" and self.router is not None:
            raise EstimatorError(f"topology {self.name!r}: dimension-order routing has no per-destination DAG")
        dist = self._distances_to(self._node(ep))
        src, dst = self.link_arrays()
        links = np.nonzero((dist[dst] >= 0) & (dist[src] == dist[dst] + 1))[0]
        if self.routing != "ecmp" and links.size:
            _, first = np.unique(src[links], return_index=True)
            links = links[first]
        depth = dist[src[links]]
        order = np.argsort(depth, kind="stable")
        links, depth = links[order], depth[order]
        cuts = np.searchsorted(depth, np.arange(1, int(depth.max(initial=0)) + 2))
        layers = [links[cuts[i]:cuts[i + 1]] for i in range(len(cuts) - 1)]
        degree = np.bincount(src[links], minlength=len(self.kinds))
        return layers, degree

    def _next_hops(self, u: int, dist: np.ndarray, target: int) -> list[int]:
        """Links out of ``u`` that lie on a shortest path to ``target`` (ascending id)."""
        if dist[u] == 1:
            return self._adjacency().get((u, target), [])
        links, dsts = self._out_arrays()[u]
        return links[dist[dsts] == dist[u] - 1].tolist()

    def _adjacency(self) -> dict[tuple[int, int], list[int]]:
        if self._adj is None:
            self._adj = {}
            for lk, (a, b) in enumerate(zip(self._src, self._dst, strict=True)):
                self._adj.setdefault((a, b), []).append(lk)
        return self._adj

    def _out_arrays(self) -> list[tuple[np.ndarray, np.ndarray]]:
        if self._outs is None:
            dst = np.asarray(self._dst, dtype=np.int64)
            self._outs = [(np.asarray(o, dtype=np.int64), dst[o] if o else np.zeros(0, dtype=np.int64))
                          for o in self._out]
        return self._outs

    def _distances_to(self, target: int) -> np.ndarray:
        """Hop distance of every node to ``target`` (-1 = cannot reach it): a vectorised BFS."""
        if not self._dist_shared:
            self._dist, self._dist_shared = self._shared_distances(), True
        dist = self._dist.get(target)
        if dist is not None:
            return dist
        if len(self.endpoints) * len(self.kinds) <= ALL_TARGETS_AT_ONCE and target in self._endpoint_set():
            self._dist.update(self._distances_to_every_endpoint())
            return self._dist[target]
        indptr, preds = self._incoming_csr()
        dist = np.full(len(self.kinds), -1, dtype=np.int64)
        dist[target] = 0
        frontier = np.array([target], dtype=np.int64)
        level = 0
        while frontier.size:
            starts, counts = indptr[frontier], indptr[frontier + 1] - indptr[frontier]
            total = int(counts.sum())
            if total == 0:
                break
            offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
            cand = preds[offsets + np.arange(total)]
            frontier = np.unique(cand[dist[cand] < 0])
            level += 1
            dist[frontier] = level
        if (len(self._dist) + 1) * len(self.kinds) > DIST_BUDGET and self._dist:  # bounded memory
            del self._dist[next(iter(self._dist))]
        self._dist[target] = dist
        return dist

    def _endpoint_set(self) -> set[int]:
        return set(self.endpoints)

    def _distances_to_every_endpoint(self) -> dict[int, np.ndarray]:
        """:meth:`_distances_to` for every endpoint at once: one BFS whose frontier is a (endpoint x
        node) matrix, a level per step, instead of one BFS per destination (a small graph's schedule
        routes to every endpoint; 64 ranks: one pass of ~log n levels instead of 64 BFS). The same
        integer distances as the per-destination BFS."""
        src, dst = self.link_arrays()
        nodes = len(self.kinds)
        targets = np.asarray(self.endpoints, dtype=np.int64)
        dist = np.full((len(targets), nodes), -1, dtype=np.int64)
        rows = np.arange(len(targets))
        dist[rows, targets] = 0
        if src.size:
            order = np.argsort(src, kind="stable")
            s, d = src[order], dst[order]
            sources, starts = np.unique(s, return_index=True)
            frontier = dist == 0
            level = 0
            while True:
                reached = np.zeros_like(frontier)
                reached[:, sources] = np.logical_or.reduceat(frontier[:, d], starts, axis=1)
                reached &= dist < 0
                if not reached.any():
                    break
                level += 1
                dist[reached] = level
                frontier = reached
        return {int(t): dist[i] for i, t in enumerate(targets)}

    def _shared_distances(self) -> dict[int, np.ndarray]:
        """The distance arrays of every topology with this one's structure (see the module docstring)."""
        h = hashlib.sha256(f"{self.routing}|{len(self.kinds)}|".encode())
        src, dst = self.link_arrays()
        for part in (np.asarray(self.endpoints, dtype=np.int64), src, dst):
            h.update(part.tobytes())
            h.update(b"|")
        key = h.hexdigest()
        hit = _SHARED_DIST.get(key)
        if hit is None:
            while len(_SHARED_DIST) >= SHARED_STRUCTURES:
                del _SHARED_DIST[next(iter(_SHARED_DIST))]
            hit = _SHARED_DIST[key] = dict(self._dist)
        return hit

    def _incoming_csr(self) -> tuple[np.ndarray, np.ndarray]:
        if self._incoming is None:
            dst = np.asarray(self._dst, dtype=np.int64)
            order = np.argsort(dst, kind="stable")
            indptr = np.concatenate(([0], np.cumsum(np.bincount(dst, minlength=len(self.kinds)))))
            self._incoming = (indptr, np.asarray(self._src, dtype=np.int64)[order])
        return self._incoming

    def max_port_bandwidth(self) -> float:
        """The largest total bandwidth any endpoint has out of it or into it."""
        bw = self.bandwidth
        src, dst = self.link_arrays()
        nodes = len(self.kinds)
        eps = np.asarray(self.endpoints, dtype=np.int64)
        out = np.bincount(src, weights=bw, minlength=nodes)[eps]
        inn = np.bincount(dst, weights=bw, minlength=nodes)[eps]
        return float(max(out.max(initial=0.0), inn.max(initial=0.0)))

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "endpoints": self.num_endpoints,
            "switches": self.kinds.count("switch"),
            "links": self.num_links,
            "routing": self.routing,
        }
