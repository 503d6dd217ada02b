"""Lumorph: Lightpath photonic servers (<= 32 tiles each) joined by fibres into a rack.

Model (seed 000, Secs. 2-4; defaults in conf/fabric/lumorph.yaml):

* A circuit between tiles of different servers runs over the fibres between them with the same
  bandwidth and latency as one inside a server (seed 000 assumes "enough fibers between servers").
* alpha-beta: every round pays ``alpha_s`` (0.7 us, NVLink-class) plus the MZI reconfiguration
  ``reconfig_s`` (3.7 us) when it needs circuits it did not already have; a GPU's egress is
  ``bandwidth_Bps`` (300 GB/s) per direction.
* Lumorph-k (radix-k halving/doubling, k = 2 and 4: a powers of two up to ``max_radix``): reduce-scatter in
  rounds where each GPU exchanges with the k-1 GPUs that differ from it in one base-k digit,
  splitting its ``wavelengths`` lasers in whole wavelengths over the k-1 circuits (so k = 4 uses
  15 of 16 wavelengths: 3 circuits x 5), then all-gather in the mirror order. Group sizes that are
  powers of two but not of k use mixed radix (the last digit smaller). Non-power-of-two groups use
  the ring (seed 000 Sec. 3). Every round changes peers, except that the first all-gather round
  reuses the last reduce-scatter round's circuits, so an all-reduce in m digits pays 2m rounds of
  alpha and 2m-1 reconfigurations (the paper charges 0.7 + 3.7 us on all 2m rounds:
  ``reconfig_every_round=true`` reproduces that accounting).
* Radix limit: a Lightpath tile's MZI switches are 1x3 (seed 000 Sec. 2), so a tile drives at
  most ``mzi_degree`` = 3 circuits at once and k - 1 <= 3: Lumorph-2 and Lumorph-4 (the paper's
  two) are all the hardware builds. ``max_radix`` above 4 is refused, so ``auto`` never offers a
  Lumorph-8 (7 concurrent circuits per tile).
* ``ring``: one ring of circuits set up once (one reconfiguration), 2(N-1) rounds at full bandwidth.
* ``dnc``: our reading of the paper's greedy divide-and-conquer baseline (seed 000 gives no
  algorithm): Lumorph-2 reduce-scatter inside each server, ring all-reduce of the shards across
  servers over fibres, Lumorph-2 all-gather inside each server. Needs whole servers (N = s x tiles).
* Reductions are not charged (the paper's alpha-beta model has no gamma term).
* Broadcast: k-ary tree, each round every holder sends the whole buffer to k-1 new GPUs
  (ceil(log_k N) rounds, any N).
  All-to-all: direct, at most k-1 circuits per round, ceil((N-1)/(k-1)) rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

import numpy as np

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.params import is_power
from estimator.collectives.patterns import StepPattern, digit_step
from estimator.collectives.pricing import PricingParams, compile_schedule, mark_reconfigurations
from estimator.collectives.schedule import Schedule, Step, Transfer
from estimator.errors import EstimatorError
from estimator.fabrics.base import FabricConfig
from estimator.fabrics.optical.base import Affine, OpticalFabric, equal_rounds_cost, rounds_cost
from estimator.fabrics.optical.circuits import circuit_mesh, circuit_share


@dataclass
class LumorphConfig(FabricConfig):
    name: str = "lumorph"
    nodes: int = 64
    tiles_per_server: int = 32
    bandwidth_Bps: float = 300.0e9
    alpha_s: float = 0.7e-6
    reconfig_s: float = 3.7e-6
    reconfig_every_round: bool = False  # True: seed 000's accounting, alpha + 3.7 us on every Lumorph-k round
    wavelengths: int = 16
    max_radix: int = 4
    mzi_degree: int = 3  # circuits one tile can drive at once (1x3 MZI switches, seed 000 Sec. 2)

    def validate(self) -> None:
        super().validate()
        if not 1 <= self.tiles_per_server <= 32:
            raise EstimatorError(f"fabric.tiles_per_server must be 1..32 (Lightpath wafer), got {self.tiles_per_server}")
        for key in ("bandwidth_Bps", "alpha_s", "reconfig_s"):
            v = getattr(self, key)
            if not v >= 0 or (key == "bandwidth_Bps" and v == 0):
                raise EstimatorError(f"fabric.{key} must be {'positive' if key == 'bandwidth_Bps' else '>= 0'}, got {v!r}")
        if self.wavelengths < 1:
            raise EstimatorError(f"fabric.wavelengths must be >= 1, got {self.wavelengths}")
        if self.max_radix < 2 or self.max_radix & (self.max_radix - 1):
            raise EstimatorError(f"fabric.max_radix must be a power of two >= 2, got {self.max_radix}")
        if self.mzi_degree < 1:
            raise EstimatorError(f"fabric.mzi_degree must be >= 1, got {self.mzi_degree}")
        if self.max_radix - 1 > self.mzi_degree:
            raise EstimatorError(
                f"fabric.max_radix={self.max_radix}: Lumorph-{self.max_radix} needs {self.max_radix - 1} circuits per tile, "
                f"but a tile's 1x{self.mzi_degree} MZI switches drive at most {self.mzi_degree} (fabric.mzi_degree)"
            )


def is_power_of_two(n: int) -> bool:
    return n >= 1 and not n & (n - 1)


@cache
def radix_digits(n: int, k: int) -> tuple[int, ...]:
    """Mixed-radix digits of a power-of-two ``n`` with radix ``k`` (last digit smaller)."""
    out = []
    while n > 1:
        f = min(k, n)
        out.append(f)
        n //= f
    return tuple(out)


def lumorph_k_schedule(collective: str, n: int, k: int, nbytes: float) -> Schedule:
    """Explicit Lumorph-k schedule (all_reduce, reduce_scatter or all_gather) on ``n`` GPUs: the
    shared library's radix-k halving/doubling when ``n`` is a power of k; otherwise the mixed-radix
    form (digits k, ..., k, n/k^m), which the library does not generate."""
    if is_power(n, k):
        return replace(lookup(f"radix{k}").schedule(collective, n, nbytes), algorithm=f"lumorph_{k}")
    digits = radix_digits(n, k)
    place = [1]
    for f in digits[:-1]:
        place.append(place[-1] * f)

    def peers(v: int, i: int) -> list[int]:
        d = (v // place[i]) % digits[i]
        return [v + (e - d) * place[i] for e in range(digits[i]) if e != d]

    rs, ag = [], []
    rem = float(nbytes)
    for i, f in enumerate(digits):
        rem /= f
        rs.append(Step(tuple(Transfer(v, u, rem, rem) for v in range(n) for u in peers(v, i))))
        ag.insert(0, Step(tuple(Transfer(v, u, rem) for v in range(n) for u in peers(v, i))))
    steps = {"all_reduce": rs + ag, "reduce_scatter": rs, "all_gather": ag}[collective]
    return Schedule(collective, f"lumorph_{k}", n, nbytes, tuple(steps))


def lumorph_k_patterns(collective: str, n: int, k: int) -> list[StepPattern]:
    """The steps of :func:`lumorph_k_schedule` as arrays (per byte of the buffer), in order."""
    rs, ag = [], []
    place, rem = 1, 1.0
    for f in radix_digits(n, k):
        rem /= f
        rs.append(digit_step(n, place, f, rem, rem))
        ag.insert(0, digit_step(n, place, f, rem, 0.0))
        place *= f
    return {"all_reduce": rs + ag, "reduce_scatter": rs, "all_gather": ag}[collective]


class LumorphFabric(OpticalFabric):
    name = "lumorph"
    Config = LumorphConfig
    COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all")

    @property
    def cfg(self) -> LumorphConfig:
        return self.config  # type: ignore[return-value]

    def _radices(self) -> tuple[int, ...]:
        return tuple(1 << i for i in range(1, self.cfg.max_radix.bit_length()))

    def algorithms(self, collective: str) -> tuple[str, ...]:
        lk = tuple(f"lumorph_{k}" for k in self._radices())
        if collective in ("all_reduce", "reduce_scatter", "all_gather"):
            return (*lk, "ring", "dnc") if collective == "all_reduce" else (*lk, "ring")
        if collective in ("broadcast", "all_to_all"):
            return lk
        return ()

    def valid_algorithms(self, collective: str, n: int) -> tuple[str, ...]:
        out = []
        for a in self.algorithms(collective):
            if a.startswith("lumorph_") and collective not in ("all_to_all", "broadcast") and not is_power_of_two(n):
                continue
            if a == "dnc" and not (n > self.cfg.tiles_per_server and n % self.cfg.tiles_per_server == 0):
                continue
            out.append(a)
        return tuple(out)

    # per-byte time of one circuit when a GPU drives `circuits` of them
    def _circuit_s_per_byte(self, circuits: int) -> float:
        return 1.0 / (self.cfg.bandwidth_Bps * circuit_share(circuits, self.cfg.wavelengths))

    def _halving_rounds(self, n: int, k: int) -> list[tuple[float, bool]]:
        """Reduce-scatter rounds of Lumorph-k as (seconds per buffer byte, reconfigures)."""
        rounds, frac = [], 1.0
        for f in radix_digits(n, k):
            frac /= f
            rounds.append((frac * self._circuit_s_per_byte(f - 1), True))
        return rounds

    def model(self, collective: str, algorithm: str, n: int) -> Affine:
        c = self.cfg
        if algorithm.startswith("lumorph_"):
            k = int(algorithm.split("_")[1])
            return self._lumorph_k(collective, n, k)
        if algorithm == "ring":
            steps = 2 * (n - 1) if collective == "all_reduce" else n - 1
            return equal_rounds_cost(c.alpha_s, c.reconfig_s, 1.0 / n / c.bandwidth_Bps, steps)
        if algorithm == "dnc":
            t = c.tiles_per_server
            servers = n // t
            intra_rs = self._lumorph_k("reduce_scatter", t, 2)
            inter = self._ring_on_shards(servers, 1.0 / t)
            return intra_rs + inter + self._lumorph_k("all_gather", t, 2)
        raise EstimatorError(f"fabric 'lumorph': unknown algorithm {algorithm!r}")  # pragma: no cover

    def _ring_on_shards(self, servers: int, frac: float) -> Affine:
        c = self.cfg
        return equal_rounds_cost(c.alpha_s, c.reconfig_s, frac / servers / c.bandwidth_Bps, 2 * (servers - 1))

    def _lumorph_k(self, collective: str, n: int, k: int) -> Affine:
        c = self.cfg
        if n == 1:
            return Affine(0.0, 0.0, 0)
        if collective == "broadcast":
            # holders multiply k-fold per round; each sends the whole buffer on k-1 circuits
            rounds, holders = [], 1
            while holders < n:
                rounds.append((self._circuit_s_per_byte(k - 1), True))
                holders *= k
        elif collective == "all_to_all":
            rounds = []
            left = n - 1
            while left > 0:
                peers = min(k - 1, left)
                rounds.append(((1.0 / n) * self._circuit_s_per_byte(peers), True))
                left -= peers
        else:
            rs = self._halving_rounds(n, k)
            if collective == "reduce_scatter":
                rounds = rs
            elif collective == "all_gather":
                rounds = list(reversed(rs))
            else:  # the first all-gather round reuses the last reduce-scatter round's circuits
                reuse = not c.reconfig_every_round
                rounds = rs + [(b, i > 0 or not reuse) for i, (b, _) in enumerate(reversed(rs))]
        return rounds_cost(c.alpha_s, c.reconfig_s, rounds)

    def p2p_time(self, src: int, dst: int, nbytes: float) -> float:
        self.check_endpoints(src, dst)
        if src == dst:
            return 0.0
        return self.cfg.alpha_s + self.cfg.reconfig_s + nbytes / self.cfg.bandwidth_Bps

    def schedule(self, collective: str, algorithm: str, n: int, nbytes: float) -> Schedule:
        """The explicit schedule of a Lumorph-k all-reduce / reduce-scatter / all-gather on ``n``
        GPUs (same signature as :meth:`estimator.fabrics.library.LibraryFabric.schedule`)."""
        n = self._group(collective, n)
        if algorithm == "default":
            algorithm = self.default_algorithm(collective)
        self._check_explicit(collective, algorithm, n)
        return lumorph_k_schedule(collective, n, int(algorithm.split("_")[1]), nbytes)

    def explicit_cost(self, collective: str, algorithm: str, n: int, nbytes: float) -> float:
        """The explicit schedule priced step by step on per-round circuits, as arrays: a step's
        transfers each ride their own direct circuit (alpha, no route latency), whose bandwidth is
        the share the busiest sender's fan-out leaves (:func:`circuit_share`); a step that needs
        circuits the previous step did not have (or every step with ``reconfig_every_round``) pays
        ``reconfig_s``. The numbers the shared library computes on :func:`circuit_mesh` (tested
        equal, :meth:`library_cost`) without building an n x n mesh."""
        self._check_explicit(collective, algorithm, n)
        c = self.cfg
        total, prev = 0.0, None
        for i, pat in enumerate(lumorph_k_patterns(collective, n, int(algorithm.split("_")[1]))):
            keys, where = np.unique(pat.src * n + pat.dst, return_inverse=True)
            fan_out = int(np.bincount(pat.src).max())
            load = np.bincount(where, weights=pat.size).max()
            bw = c.bandwidth_Bps * circuit_share(fan_out, c.wavelengths)
            change = c.reconfig_every_round or i == 0 or not np.array_equal(keys, prev)
            total += c.alpha_s + load * nbytes / bw + (c.reconfig_s if change else 0.0)
            prev = keys
        return total

    def _check_explicit(self, collective: str, algorithm: str, n: int) -> None:
        if not algorithm.startswith("lumorph_") or collective not in ("all_reduce", "reduce_scatter", "all_gather"):
            raise EstimatorError(f"fabric 'lumorph': no explicit schedule for {algorithm} {collective}")
        if algorithm not in self.valid_algorithms(collective, n):
            raise EstimatorError(f"fabric 'lumorph': {algorithm} needs a power-of-two group, got {n}")

    def library_cost(self, collective: str, algorithm: str, n: int, nbytes: float) -> float:
        """The explicit schedule priced by the shared library on per-round circuit meshes (the
        reference :meth:`explicit_cost` is tested against; n x n links: small n only)."""
        sched = mark_reconfigurations(self.schedule(collective, algorithm, n, nbytes))
        if self.cfg.reconfig_every_round:
            sched = replace(sched, steps=tuple(replace(st, reconfigure=True) for st in sched.steps))
        c = self.cfg
        params = PricingParams(alpha_s=c.alpha_s, reconfig_s=c.reconfig_s)
        meshes: dict[int, object] = {}
        total = 0.0
        for step in sched.steps:
            fan_out = max(sum(1 for t in step.transfers if t.src == s) for s in {t.src for t in step.transfers})
            topo = meshes.get(fan_out) or meshes.setdefault(
                fan_out, circuit_mesh(sched.nodes, c.bandwidth_Bps, fan_out, c.wavelengths)
            )
            one = replace(sched, steps=(step,))
            total += compile_schedule(one, topo, params).time(nbytes)
        return total
