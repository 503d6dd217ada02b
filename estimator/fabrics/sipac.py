"""SiPAC(r, l): silicon-photonic BCube-like cluster of multi-wavelength selective switches.

Model (seed 003 Sec. 2; defaults in conf/fabric/sipac.yaml):

* N = r^(l+1) compute units (CUs); CU digits d_0..d_l in base r; at level j the r CUs that differ
  only in digit j share an r-port MRR wavelength-selective switch (WSS).
* A CU has L = l+1 optical ports; the per-CU bandwidth B (``per_cu_bandwidth_bps``, the sum over
  ports) is split evenly, b = B/L per port. The WSS gives every CU a dedicated wavelength channel
  to each of its r-1 peers on that level (no output-port blocking), so a port's wavelengths are
  split over them: b/(r-1) per peer channel, (l+1)(r-1) direct peers in all. With ``multicast``
  the WSS drops one port's signal at the r-1 peers of a level; ``multicast_split`` says what each
  peer gets: ``wavelengths`` (default) — the port's wavelengths are divided among the peers, so each
  receives at b/(r-1) and the port never emits more than its b; ``full`` — the port's signal is
  power-split (1:(r-1), 8.5 dB at r = 8) and every peer receives the full rate b, which assumes a
  link budget the paper does not give (an optimistic upper bound, kept for comparison).
* Non-peers are reached through CUs that relay (BCube-style digit correction, ECMP over the
  orders). A relay is an O/E/O hop (receive, buffer, re-send): it costs ``relay_latency_s``, the
  same per-hop charge the electrical BCube baseline pays per switch hop (conf/fabric/bcube.yaml,
  1 us). Every message pays ``alpha_s``; no switch buffering or queueing (the paper's reason for
  SiPAC's advantage, seed 003 Sec. 4). (Implementation: every channel link carries
  ``relay_latency_s`` and the per-message alpha given to the pricing is alpha_s - relay_latency_s,
  so a transfer over h hops pays exactly alpha_s + (h-1) relay_latency_s.)

Collectives are the shared library's schedules priced on this topology (see
:mod:`estimator.collectives.pricing`), with closed forms (fast path, tested equal for small N):

* all-reduce / reduce-scatter / all-gather ``dimwise`` (BCube / Flex-SiPCO, the library's
  dimension-wise algorithm): 2L alpha + 2(N-1)/N M/B for all-reduce;
* incast (``gather``, ``direct``): every CU sends M/N to CU 0, limited by CU 0's L(r-1) inbound
  channels: alpha + (L-1) relays + (N-1)/N M/B;
* all-to-all ``direct``: alpha + (L-1) relays + M L (r-1) / (r B) (each byte crosses L(r-1)/r
  channels on average, every channel equally loaded);
* broadcast ``multicast``: the buffer is cut into L parts, part j multicast along dimensions
  j, j+1, ..., so every step uses all L ports: L (alpha + (r-1) M/B) with the ``wavelengths`` split
  (the same as the unicast ``spanning_tree``), L (alpha + M/B) with ``full``; the library's
  unicast broadcasts (spanning tree, pipelined chain / tree, scatter + all-gather, binomial) are
  offered too and ``auto`` takes the fastest.
* ``hybrid`` (:meth:`SipacFabric.hybrid_cost`): an all-reduce followed by an all-to-all (seed 003
  Fig. 4b's hybrid-parallel traffic).

A parallel group (:meth:`SipacFabric.group_cost`, called by :mod:`estimator.parallel.placement`;
ranks ``stride`` apart, rank ``i`` = CU ``i``) is priced where it sits: its members take ``f_j``
digit values at level ``j`` (a group inside one level-0 WSS uses only that switch; a group of
r^k CUs ``r^j`` apart is the sub-SiPAC of levels j..j+k-1). Only the channels of the levels it uses
carry its traffic (the other levels' channels of its CUs belong to sibling groups, which
communicate at the same time), and a CU talks to its ``f_j - 1`` peers at level ``j`` on their
dedicated channels of b/(r-1) each (our reading: the WSS's wavelength plan is fixed, so a level
with ``f_j < r`` members leaves the other channels idle). Dimension-wise reduce-scatter /
all-gather / all-reduce: the buffer is cut into one part per used level, part ``p`` runs the
levels in rotated order so every step keeps every used level busy; a step takes ``alpha_s`` + the
slowest part's ``bytes x (r-1) / (f_j b)``. For the whole SiPAC (all ``f_j = r``) this is the
closed form above, and for sub-SiPAC groups the price the topology layer gives all sibling groups'
schedules routed together (:mod:`estimator.parallel.concurrent`; both tested equal). All-to-all ``direct``: alpha + (levels used - 1) relays + the
busiest level's ``M (r-1) / (f_j b)``. Sibling groups use disjoint channels: no sharing. A group
that is not such a grid, other collectives and other algorithms are priced as ``size``
consecutive CUs (:meth:`collective_cost`).
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.params import AlgoParams, is_power, log_k
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams
from estimator.errors import EstimatorError, non_negative, positive
from estimator.fabrics.base import CollectiveCost, FabricConfig
from estimator.fabrics.library import LibraryFabric
from estimator.fabrics.optical.compile_cache import SharedCompiled
from estimator.topology.graph import Topology
from estimator.topology.hamming import hamming_compiled

MULTICAST_SPLITS = ("wavelengths", "full")


@dataclass
class SipacConfig(FabricConfig):
    name: str = "sipac"
    r: int = 8
    l: int = 2  # noqa: E741 - the paper's name for the level index
    nodes: int = 512
    per_cu_bandwidth_bps: float = 2048.0e9
    alpha_s: float = 0.5e-6
    relay_latency_s: float = 1.0e-6
    multicast: bool = True
    multicast_split: str = "wavelengths"

    def validate(self) -> None:
        super().validate()
        if self.r < 2 or self.l < 0:
            raise EstimatorError(f"fabric sipac: need r >= 2 and l >= 0, got r={self.r}, l={self.l}")
        if self.nodes != self.r ** (self.l + 1):
            raise EstimatorError(
                f"fabric.nodes={self.nodes}: SiPAC(r={self.r}, l={self.l}) has r^(l+1) = {self.r ** (self.l + 1)} CUs"
            )
        positive(self.per_cu_bandwidth_bps, "fabric.per_cu_bandwidth_bps")
        non_negative(self.alpha_s, "fabric.alpha_s")
        non_negative(self.relay_latency_s, "fabric.relay_latency_s")
        if self.multicast_split not in MULTICAST_SPLITS:
            raise EstimatorError(
                f"fabric.multicast_split must be one of {', '.join(MULTICAST_SPLITS)}, got {self.multicast_split!r}"
            )

    @property
    def levels(self) -> int:
        return self.l + 1

    @property
    def port_Bps(self) -> float:
        return self.per_cu_bandwidth_bps / 8 / self.levels


def sipac_topology(r: int, levels: int, port_Bps: float, hop_s: float = 0.0) -> Topology:
    """CUs with one dedicated channel of port_Bps/(r-1) and latency ``hop_s`` to each same-level
    peer; CUs relay (ECMP)."""
    n = r**levels
    topo = Topology(f"sipac_r{r}_L{levels}", "ecmp")
    eps = [topo.add_endpoint(f"cu{i}") for i in range(n)]
    channel = port_Bps / (r - 1)
    for lvl in range(levels):
        stride = r**lvl
        for a in range(n):
            digit = (a // stride) % r
            for j in range(r):
                if j != digit:
                    topo.add_link(eps[a], eps[a + (j - digit) * stride], channel, hop_s)
    return topo


class SipacFabric(SharedCompiled, LibraryFabric):
    name = "sipac"
    Config = SipacConfig
    OFFERS = {
        "all_reduce": ("dimwise", "ring", "halving_doubling", "double_binary_tree"),
        "reduce_scatter": ("dimwise", "ring"),
        "all_gather": ("dimwise", "ring"),
        "broadcast": ("multicast", "spanning_tree", "pipelined_chain", "pipelined_chain64", "pipelined_tree",
                      "pipelined_tree64", "scatter_allgather", "binomial_tree"),
        "gather": ("direct", "binomial_tree"),
        "all_to_all": ("direct",),  # pairwise is never faster here and slow to price at 512
        "p2p": ("direct",),
    }
    CLOSED = {("all_reduce", "dimwise"), ("reduce_scatter", "dimwise"), ("all_gather", "dimwise"),
              ("gather", "direct"), ("all_to_all", "direct"), ("broadcast", "multicast")}

    @property
    def cfg(self) -> SipacConfig:
        return self.config  # type: ignore[return-value]

    def algorithms(self, collective: str) -> tuple[str, ...]:
        offers = super().algorithms(collective)
        if not self.cfg.multicast:
            offers = tuple(a for a in offers if a != "multicast")
        return offers

    def build_topology(self, algorithm: str) -> Topology:
        return sipac_topology(self.cfg.r, self.cfg.levels, self.cfg.port_Bps, self.cfg.relay_latency_s)

    def pricing(self, algorithm: str) -> PricingParams:
        # every hop carries relay_latency_s; the first is not a relay (see the module docstring)
        return PricingParams(alpha_s=self.cfg.alpha_s - self.cfg.relay_latency_s)

    def algo_params(self, n: int) -> AlgoParams:
        return AlgoParams(radix=self.cfg.r)

    def check_size(self, n: int) -> None:
        super().check_size(n)
        if n > 1 and not is_power(n, self.cfg.r):
            raise EstimatorError(
                f"fabric 'sipac': a group of {n} is not a sub-SiPAC (a power of r={self.cfg.r})"
            )

    def check_algorithm(self, collective: str, algorithm: str, n: int) -> None:
        if algorithm == "multicast":
            return
        super().check_algorithm(collective, algorithm, n)

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        """Explicit schedules with a step pattern, routed analytically over correction orders
        (:func:`estimator.topology.hamming.hamming_compiled`; equal to the graph compile, tested)."""
        if algorithm == "multicast":
            return None
        pats = patterns(algorithm, collective, n, self.algo_params(n))
        if pats is None:
            return None
        c = self.cfg
        return hamming_compiled(pats, c.r, c.levels, n, c.port_Bps / (c.r - 1), c.relay_latency_s,
                                self.pricing(algorithm), n == self.nodes)

    def schedule(self, collective: str, algorithm: str, n: int, nbytes: float):
        if self.resolve(collective, algorithm, n, nbytes) == "multicast":
            raise EstimatorError("fabric 'sipac': multicast broadcast has no unicast schedule (closed form only)")
        return super().schedule(collective, algorithm, n, nbytes)

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        if (collective, algorithm) not in self.CLOSED:
            return None
        c = self.cfg
        if n <= 1:
            return 0.0, 0
        levels = log_k(n, c.r)
        bw = c.port_Bps * c.levels  # B in bytes/s: the sum over a CU's ports
        if algorithm == "dimwise":
            return lookup("dimwise").switch_cost(collective, n, nbytes, c.alpha_s, bw, 0.0, self.algo_params(n))
        if algorithm == "multicast":
            fan = 1 if c.multicast_split == "full" else c.r - 1
            return levels * (c.alpha_s + fan * nbytes / bw), levels
        # gather / all_to_all direct: one step, the busiest channel; the farthest CU is L-1 relays away
        latency = c.alpha_s + (levels - 1) * c.relay_latency_s
        if collective == "gather":
            return latency + (n - 1) / n * nbytes / bw, 1
        return latency + nbytes * levels * (c.r - 1) / (c.r * bw), 1

    # ---- auto pruning hooks (see LibraryFabric.auto_floor) --------------------------------------
    def port_bandwidth(self) -> float:
        return self.cfg.port_Bps * self.cfg.levels  # B: a CU's (r-1) channels on each of its L ports

    def min_route_latency(self) -> float:
        return self.cfg.relay_latency_s  # every channel hop carries it (the pricing's α is α - relay)

    def hybrid_cost(self, nbytes: float, group_size: int | None = None) -> float:
        """Seconds for an all-reduce then an all-to-all of ``nbytes`` (hybrid parallelism)."""
        return (self.collective_cost("all_reduce", nbytes, "dimwise", group_size).time_s
                + self.collective_cost("all_to_all", nbytes, "direct", group_size).time_s)

    # ---- one parallel group where it sits (module docstring) ------------------------------------
    def group_levels(self, size: int, stride: int) -> tuple[int, ...] | None:
        """Digit values ``f_j`` the group's members take at each level it spans, or None when the
        members are not a grid of digit values (then the group is priced as consecutive CUs)."""
        r, levels = self.cfg.r, self.cfg.levels
        ranks = [j * stride for j in range(size)]
        if ranks[-1] >= self.nodes:
            return None
        counts = tuple(len({(q // r**lvl) % r for q in ranks}) for lvl in range(levels))
        used = tuple(f for f in counts if f > 1)
        prod = 1
        for f in used:
            prod *= f
        return used if prod == size else None

    def group_cost(self, collective: str, nbytes: float, size: int, stride: int, algorithm: str = "default") -> CollectiveCost:
        used = self.group_levels(size, stride)
        dimwise = collective in ("all_reduce", "reduce_scatter", "all_gather") and algorithm in ("default", "auto", "dimwise")
        direct = collective == "all_to_all" and algorithm in ("default", "auto", "direct")
        if used is None or not used or not (dimwise or direct):
            return self.collective_cost(collective, nbytes, algorithm, group_size=size)
        c = self.cfg
        b = c.port_Bps
        if direct:
            t = c.alpha_s + (len(used) - 1) * c.relay_latency_s + max(nbytes * (c.r - 1) / (f * b) for f in used)
            return CollectiveCost(collective, "direct", size, float(nbytes), t, 1)
        k, t = len(used), 0.0
        for step in range(k):  # reduce-scatter; the all-gather mirrors it (same step times, reversed)
            slowest = 0.0
            for part in range(k):
                done = 1
                for i in range(step):
                    done *= used[(part + i) % k]
                f = used[(part + step) % k]
                slowest = max(slowest, nbytes / k / done * (c.r - 1) / (f * b))
            t += c.alpha_s + slowest
        steps = k
        if collective == "all_reduce":
            t, steps = 2 * t, 2 * k
        return CollectiveCost(collective, "dimwise", size, float(nbytes), t, steps)
