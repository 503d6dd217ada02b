"""SiPAC(r, l): silicon-photonic BCube-like cluster of multi-wavelength selective switches.

Model (seed 003 Sec. 2; defaults in conf/fabric/sipac.yaml):

* N = r^(l+1) compute units (CUs); CU digits d_0..d_l in base r; at level j the r CUs that differ
  only in digit j share an r-port MRR wavelength-selective switch (WSS).
* A CU has L = l+1 optical ports; the per-CU bandwidth B (``per_cu_bandwidth_bps``, the sum over
  ports) is split evenly, b = B/L per port. The WSS gives every CU a dedicated wavelength channel
  to each of its r-1 peers on that level (no output-port blocking), so a port's wavelengths are
  split over them: b/(r-1) per peer channel, (l+1)(r-1) direct peers in all. With ``multicast``
  the WSS can also drop one signal at all r-1 peers of a level at the full port rate b.
* Non-peers are reached through CUs that relay (BCube-style digit correction, ECMP over the
  orders). Every message pays ``alpha_s``; no switch buffering or queueing (the paper's reason
  for SiPAC's advantage, seed 003 Sec. 4).

Collectives are the shared library's schedules priced on this topology (see
:mod:`estimator.collectives.pricing`), with closed forms (fast path, tested equal for small N):

* all-reduce / reduce-scatter / all-gather ``dimwise`` (BCube / Flex-SiPCO, the library's
  dimension-wise algorithm): 2L alpha + 2(N-1)/N M/B for all-reduce;
* incast (``gather``, ``direct``): every CU sends M/N to CU 0, limited by CU 0's L(r-1) inbound
  channels: alpha + L hops + (N-1)/N M/B;
* all-to-all ``direct``: alpha + L hops + M L (r-1) / (r B) (each byte crosses L(r-1)/r channels
  on average, every channel equally loaded);
* broadcast ``multicast``: the buffer is cut into L parts, part j multicast along dimensions
  j, j+1, ..., so every step uses all L ports at rate b: L (alpha + M/B) (no pipelining, like the
  library's trees); ``binomial_tree`` is the unicast alternative.
* ``hybrid`` (:meth:`SipacFabric.hybrid_cost`): an all-reduce followed by an all-to-all (seed 003
  Fig. 4b's hybrid-parallel traffic).
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.params import AlgoParams, is_power, log_k
from estimator.collectives.pricing import PricingParams
from estimator.errors import EstimatorError, non_negative, positive
from estimator.fabrics.base import FabricConfig
from estimator.fabrics.library import LibraryFabric
from estimator.fabrics.optical.compile_cache import SharedCompiled
from estimator.topology.graph import Topology


@dataclass
class SipacConfig(FabricConfig):
    name: str = "sipac"
    r: int = 8
    l: int = 2  # noqa: E741 - the paper's name for the level index
    nodes: int = 512
    per_cu_bandwidth_bps: float = 2048.0e9
    alpha_s: float = 0.5e-6
    multicast: bool = True

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

    @property
    def levels(self) -> int:
        return self.l + 1

    @property
    def port_Bps(self) -> float:
        return self.per_cu_bandwidth_bps / 8 / self.levels


def sipac_topology(r: int, levels: int, port_Bps: float) -> Topology:
    """CUs with one dedicated channel of port_Bps/(r-1) to each same-level peer; CUs relay (ECMP)."""
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
                    topo.add_link(eps[a], eps[a + (j - digit) * stride], channel, 0.0)
    return topo


class SipacFabric(SharedCompiled, LibraryFabric):
    name = "sipac"
    Config = SipacConfig
    OFFERS = {
        "all_reduce": ("dimwise", "ring", "halving_doubling", "double_binary_tree"),
        "reduce_scatter": ("dimwise", "ring"),
        "all_gather": ("dimwise", "ring"),
        "broadcast": ("multicast", "binomial_tree"),
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
        return sipac_topology(self.cfg.r, self.cfg.levels, self.cfg.port_Bps)

    def pricing(self, algorithm: str) -> PricingParams:
        return PricingParams(alpha_s=self.cfg.alpha_s)

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
            return levels * (c.alpha_s + nbytes / bw), levels
        # gather / all_to_all direct: one step, the busiest channel (relays add no latency here)
        if collective == "gather":
            return c.alpha_s + (n - 1) / n * nbytes / bw, 1
        return c.alpha_s + nbytes * levels * (c.r - 1) / (c.r * bw), 1

    def hybrid_cost(self, nbytes: float, group_size: int | None = None) -> float:
        """Seconds for an all-reduce then an all-to-all of ``nbytes`` (hybrid parallelism)."""
        return (self.collective_cost("all_reduce", nbytes, "dimwise", group_size).time_s
                + self.collective_cost("all_to_all", nbytes, "direct", group_size).time_s)
