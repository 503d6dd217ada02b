"""``LibraryFabric``: a fabric = a topology + the shared collective library.

A subclass declares:

* ``Config``: its dataclass of parameters (validated in ``validate``);
* ``OFFERS``: ``{collective: (algorithm, ...)}``, default = the first that fits the group (names from
  :mod:`estimator.collectives.algorithms`; ``radix4`` etc. allowed);
* ``build_topology(self, algorithm)``: the :class:`~estimator.topology.Topology` (may differ per
  algorithm, e.g. NCCL's per-algorithm latencies; cached per returned object by the caller);
* ``pricing(self, algorithm)``: :class:`~estimator.collectives.pricing.PricingParams`;
* optionally ``algo_params(self, n)`` (radix, torus dims, ranks per node), ``ranks(self, n)``
  (which endpoints a group of n uses; default the first n) and ``closed_form(self, collective,
  algorithm, n, nbytes)`` returning ``(seconds, steps)`` or ``None`` to fall back to the compiled
  schedule (which is exact, cached per (collective, algorithm, n), and priced in microseconds).

Costs are memoised per (collective, algorithm, n, nbytes), so the timeline can call
:meth:`collective_cost` for every gradient bucket.

Chunking: a fabric whose config has ``chunks`` (default 1) or ``chunk_bytes`` (0 = off) cuts every
collective into that many equal chunks run one after another, each a full collective
(``k x cost(M / k)``) -- what ASTRA-sim's system layer does with ``preferred-dataset-splits: k`` and
``active-chunks-per-dimension: 1`` (see :mod:`estimator.workloads.astrasim`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from estimator.collectives.algorithms import algorithm as lookup
from estimator.collectives.algorithms import collective_name
from estimator.collectives.params import AlgoParams
from estimator.collectives.patterns import patterns
from estimator.collectives.pricing import CompiledSchedule, PricingParams, compile_schedule
from estimator.collectives.schedule import Schedule, Step, Transfer
from estimator.errors import EstimatorError
from estimator.fabrics.base import CollectiveCost, Fabric
from estimator.topology.graph import Topology

ALL_PAIRS = {"direct", "one_shot", "pairwise"}
ALL_PAIRS_COLLECTIVES = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all"}  # n(n-1) transfers
MAX_EXPLICIT_PAIRS = 4_000_000  # all-pairs schedules beyond this many transfers are refused
# `auto` must stay cheap (an estimate prices every gradient bucket): without a closed form on this
# fabric, an all-pairs algorithm is only a candidate up to this many transfers (~256 ranks), or up to
# MAX_EXPLICIT_PAIRS when no other candidate fits (all_to_all: direct and pairwise), priced as naming it does.
AUTO_MAX_PAIRS = 65_536
# `auto` skips a candidate whose lower bound exceeds the best price by more than this (relative):
# the bound and the price are computed differently, so a tie must not be lost to rounding.
PRUNE_MARGIN = 1e-9
# pattern_floor folds a periodic step onto its first period up to this period; a longer one is
# bounded from the step's sample (StepPattern.sample), which costs O(sample), not O(n)
FOLD_MAX = 256
# pattern_floor bounds schedules of >= 4 x this many distinct steps from every FIRST_PASS-th step first
FIRST_PASS = 4


def check_chunking(config: Any) -> None:
    """Validate the optional ``chunks`` (>= 1) and ``chunk_bytes`` (>= 0, 0 = use chunks) fields."""
    chunks = getattr(config, "chunks", 1)
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise EstimatorError(f"fabric.chunks must be a positive integer, got {chunks!r}")
    chunk_bytes = getattr(config, "chunk_bytes", 0.0)
    if not (isinstance(chunk_bytes, int | float) and chunk_bytes >= 0):
        raise EstimatorError(f"fabric.chunk_bytes must be a non-negative number of bytes, got {chunk_bytes!r}")


def _per_step(ufunc: np.ufunc, values: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """``ufunc`` reduced over each step's run of ``values`` (runs of ``lens``; 0 for an empty run)."""
    out = np.zeros(len(lens))
    full = lens > 0
    if full.any():
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])[full]
        out[full] = ufunc.reduceat(values, starts)
    return out


def _busiest(sid: np.ndarray, who: np.ndarray, weight: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Per step, the largest total ``weight`` of one ``who`` (sender or receiver) in it."""
    if not len(sid):
        return np.zeros(len(lens))
    key = sid * (int(who.max()) + 1) + who
    order = np.argsort(key, kind="stable")
    key = key[order]
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    sums = np.add.reduceat(weight[order], starts)
    out = np.zeros(len(lens))
    np.maximum.at(out, sid[order][starts], sums)
    return out


def _family(name: str) -> str | None:
    try:
        return lookup(name).base
    except EstimatorError:
        return None


class LibraryFabric(Fabric):
    OFFERS: dict[str, tuple[str, ...]] = {}
    # the algorithms (registry base names) :meth:`priced_without_arrays` can accept; None: any. Lets
    # ``auto`` skip building the patterns of the others (pairwise at 65,536 ranks: 65,535 steps, ~1 s)
    PRICED_WITHOUT_ARRAYS: frozenset[str] | None = None

    def __init__(self, config: Any):
        super().__init__(config)
        self._memo: dict[tuple[str, str, int, float, bool], CollectiveCost] = {}
        self._compiled: dict[tuple[str, str, int], CompiledSchedule] = {}
        self._topos: dict[str, Topology] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Pickle (e.g. to a Ray worker) without the caches: topologies hold router closures."""
        state = dict(self.__dict__)
        state["_memo"], state["_compiled"], state["_topos"] = {}, {}, {}
        return state

    # ---- hooks -----------------------------------------------------------------------------
    def build_topology(self, algorithm: str) -> Topology:
        raise NotImplementedError

    def topology_key(self, algorithm: str) -> str:
        """Algorithms with the same key share one topology object (default: all)."""
        return ""

    def pricing(self, algorithm: str) -> PricingParams:
        return PricingParams()

    def algo_params(self, n: int) -> AlgoParams:
        return AlgoParams()

    def ranks(self, n: int) -> list[int]:
        return list(range(n))

    def closed_form(self, collective: str, algorithm: str, n: int, nbytes: float) -> tuple[float, int] | None:
        return None

    # ---- plumbing --------------------------------------------------------------------------
    def topology(self, algorithm: str = "") -> Topology:
        key = self.topology_key(algorithm)
        topo = self._topos.get(key)
        if topo is None:
            topo = self._topos[key] = self.build_topology(algorithm)
        return topo

    def algorithms(self, collective: str) -> tuple[str, ...]:
        return tuple(self.OFFERS.get(collective_name(collective), ()))

    def _group(self, group_size: int | None) -> int:
        n = self.nodes if group_size is None else group_size
        if isinstance(n, bool) or not isinstance(n, int):
            raise EstimatorError(f"group_size must be an integer, got {n!r}")
        self.check_size(n)
        return n

    def _names(self, collective: str, algorithm: str) -> list[str]:
        offered = self.algorithms(collective)
        if not offered:
            raise EstimatorError(f"fabric {self.name!r} offers no algorithm for {collective}")
        if algorithm in ("default", "", None, "auto"):
            return list(offered)
        if algorithm not in offered and _family(algorithm) not in {_family(a) for a in offered}:
            raise EstimatorError(
                f"fabric {self.name!r}: algorithm {algorithm!r} is not offered for {collective}; "
                f"offered: {', '.join(offered)}, auto"
            )
        return [algorithm]

    def resolve(self, collective: str, algorithm: str, n: int, nbytes: float = 1.0) -> str:
        """The concrete algorithm name ``algorithm`` (default/auto/name) stands for."""
        if algorithm == "auto":
            return self.collective_cost(collective, nbytes, "auto", n).algorithm
        return self._names(collective_name(collective), algorithm)[0]

    def check_algorithm(self, collective: str, algorithm: str, n: int) -> None:
        lookup(algorithm).check(collective, n, self.algo_params(n))

    def schedule(self, collective: str, algorithm: str, n: int, nbytes: float) -> Schedule:
        collective = collective_name(collective)
        name = self.resolve(collective, algorithm, n, nbytes)
        if name in ALL_PAIRS and collective in ALL_PAIRS_COLLECTIVES and n * (n - 1) > MAX_EXPLICIT_PAIRS:
            raise EstimatorError(f"algorithm {name!r} on {n} ranks: explicit schedule too large ({n * (n - 1)} transfers)")
        return lookup(name).schedule(collective, n, nbytes, self.algo_params(n))

    def compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule:
        key = (collective, algorithm, n)
        hit = self._compiled.get(key)
        if hit is None:
            sched = self.schedule(collective, algorithm, n, 1.0)
            hit = compile_schedule(sched, self.topology(algorithm), self.pricing(algorithm), self.ranks(n))
            self._compiled[key] = hit
        return hit

    # ---- the Fabric interface ------------------------------------------------------------------
    def collective_cost(
        self, collective: str, nbytes: float, algorithm: str = "default", group_size: int | None = None,
        explicit: bool = False,
    ) -> CollectiveCost:
        """Price a collective. ``explicit=True`` always prices the explicit schedule."""
        collective = collective_name(collective)
        n = self._group(group_size)
        if not (nbytes >= 0):
            raise EstimatorError(f"bytes must be a non-negative number, got {nbytes!r}")
        key = (collective, algorithm, n, float(nbytes), explicit)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        names = self._names(collective, algorithm)
        first_valid = algorithm in ("default", "", None)  # default: the first offered that fits n
        best: CollectiveCost | None = None
        best_at = len(names)
        errors = []
        auto = algorithm == "auto"
        order, floors, fast = (self._auto_order(collective, names, n, float(nbytes), explicit) if auto
                               else (range(len(names)), {}, {}))
        skipped = []
        for i in order:
            name = names[i]
            if (auto and i not in fast and name in ALL_PAIRS and collective in ALL_PAIRS_COLLECTIVES
                    and n * (n - 1) > AUTO_MAX_PAIRS):
                if n * (n - 1) <= MAX_EXPLICIT_PAIRS:
                    skipped.append(i)
                else:
                    errors.append((i, f"{name}: no auto candidate on {n} ranks here (all pairs); name it: algorithm={name}"))
                continue
            try:  # a candidate that does not fit n raises (in its bound or its price): auto skips it
                if best is not None and i not in fast and self._loses(collective, name, n, float(nbytes),
                                                                      floors.get(i), best):
                    continue  # its lower bound already loses: never compile its schedule
                cost = self._price(collective, name, n, float(nbytes), explicit, fast.get(i))
            except EstimatorError as exc:
                if len(names) == 1:
                    raise
                errors.append((i, str(exc)))
                continue
            if best is None or cost.time_s < best.time_s or (cost.time_s == best.time_s and i < best_at):
                best, best_at = cost, i  # ties go to the first offered, as without pruning
            if first_valid:
                break
        if best is None and skipped:  # nothing else fits: the all-pairs candidates, priced as naming them does
            priced = []
            for i in skipped:
                try:
                    priced.append((i, self._price(collective, names[i], n, float(nbytes), explicit)))
                except EstimatorError as exc:
                    errors.append((i, str(exc)))
            if priced:
                best = min(priced, key=lambda ic: (ic[1].time_s, ic[0]))[1]  # ties: the first offered
        if best is None:
            raise EstimatorError(f"fabric {self.name!r}: no valid algorithm for {collective} on {n} ranks ({'; '.join(e for _, e in sorted(errors))})")
        self._memo[key] = best
        return best

    def _loses(self, collective: str, name: str, n: int, nbytes: float, floor: float | None,
               best: CollectiveCost) -> bool:
        """True if a lower bound on ``name``'s price exceeds ``best``: the switch-formula floor
        first, then (only if that is not enough) the tighter, costlier :meth:`pattern_floor`."""
        limit = best.time_s * (1 + PRUNE_MARGIN)
        if floor is not None and floor > limit:
            return True
        tight = self.pattern_floor(collective, name, n, nbytes, limit)
        return tight is not None and tight > limit

    def _auto_order(self, collective: str, names: list[str], n: int, nbytes: float, explicit: bool
                    ) -> tuple[list[int], dict[int, float], dict[int, tuple[float, int]]]:
        """``auto``'s evaluation order, lower bounds and closed forms (evaluated here once):
        candidates with a closed form on this fabric first (cheap), then the others by rising
        :meth:`auto_floor`; a candidate whose floor exceeds the best price found so far is never
        compiled."""
        floors: dict[int, float] = {}
        fast: dict[int, tuple[float, int]] = {}
        cheap, rest = [], []
        for i, name in enumerate(names):
            try:
                found = None if explicit else self.closed_form(collective, name, n, nbytes / self.chunking(nbytes))
            except EstimatorError:
                found = None  # _price raises it again, in order
            if found is None:
                quick = self.quick_compiled(collective, name, n)
                if quick is not None and not quick.reconfig_steps:
                    found = (quick.time(nbytes / self.chunking(nbytes)), quick.steps)
            if found is not None:
                fast[i] = found
                cheap.append(i)
                continue
            try:
                floor = self.auto_floor(collective, name, n, nbytes)
            except EstimatorError:
                floor = None  # does not fit n: _price raises it again, in order
            if floor is not None:
                floors[i] = floor
            rest.append(i)
        rest.sort(key=lambda i: floors.get(i, -math.inf))
        return cheap + rest, floors, fast

    # ---- auto pruning hooks ------------------------------------------------------------------
    def quick_compiled(self, collective: str, name: str, n: int) -> CompiledSchedule | None:
        """``name``'s schedule priced by :meth:`analytic_compiled` if :meth:`priced_without_arrays`
        says that needs no per-rank arrays, else None. ``auto`` prices such candidates first, like
        closed forms."""
        if self.PRICED_WITHOUT_ARRAYS is not None and lookup(name).base not in self.PRICED_WITHOUT_ARRAYS:
            return None
        try:
            self.check_algorithm(collective, name, n)
            pats = patterns(name, collective, n, self.algo_params(n))
        except EstimatorError:
            return None
        return self._analytic(collective, name, n) if pats and self.priced_without_arrays(pats, n) else None

    def priced_without_arrays(self, pats: list, n: int) -> bool:
        """True if :meth:`analytic_compiled` prices every step of ``pats`` (over n ranks) from its
        shape alone (e.g. digit steps on a whole ring or torus,
        :func:`estimator.topology.ring.ring_digits_only`); default False."""
        return False

    def port_bandwidth(self) -> float | None:
        """An upper bound on any endpoint's total bandwidth in (or out), bytes/s; None (the
        default) turns off ``auto``'s pruning on this fabric."""
        return None

    def min_route_latency(self) -> float:
        """A lower bound on the latency of a route between two distinct endpoints (default 0)."""
        return 0.0

    def auto_floor(self, collective: str, name: str, n: int, nbytes: float) -> float | None:
        """A lower bound on the schedule price of ``name``: its switch formula with α = the
        pricing's α + step overhead + :meth:`min_route_latency` and every port as wide as
        :meth:`port_bandwidth`. Valid because that formula is the schedule priced on such a star
        (tested), and on the topology each step's busiest sender/receiver spreads its bytes over
        links of at most that total bandwidth, every route is at least that slow, and reductions,
        reconfigurations and extras only add. None: no bound (no closed form / invalid)."""
        bw = self.port_bandwidth()
        if bw is None or collective == "p2p":
            return None
        k = self.chunking(nbytes)
        p = self.pricing(name)
        alpha = p.alpha_s + p.step_overhead_s + self.min_route_latency()
        try:
            t, steps = lookup(name).switch_cost(collective, n, nbytes / k, alpha, bw, p.gamma, self.algo_params(n))
        except EstimatorError:
            return None
        return k * (t + (p.fixed_s if steps else 0.0))

    def route_bounds(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
        """Per transfer (endpoint arrays, src != dst): a lower bound on its route's latency, an
        upper bound on the bandwidth one transfer can get, and the links on its route (or None);
        None (the default): no :meth:`pattern_floor` on this fabric."""
        return None

    def link_capacity(self) -> float | None:
        """Total bandwidth of all links (for the volume bound of :meth:`pattern_floor`), or None."""
        return None

    def cut_seconds(self, src: np.ndarray, dst: np.ndarray, size: np.ndarray, period: int = 0) -> float:
        """A lower bound on a step's busiest link load / bandwidth (per byte of M) from a cut, e.g.
        a server's bytes to other servers over its total uplink bandwidth (:func:`server_cut_bytes`);
        0 (default): none. ``period`` > 0: the transfers are those out of ranks 0..P-1 of a
        P-periodic step."""
        return 0.0

    def shift_invariant(self, period: int, n: int) -> bool:
        """True if shifting ranks 0..n-1 by ``period`` (mod n) maps :meth:`route_bounds`,
        :meth:`cut_seconds` and the topology onto themselves (default: never assumed)."""
        return False

    def pattern_floor(self, collective: str, name: str, n: int, nbytes: float, limit: float = math.inf
                      ) -> float | None:
        """A lower bound on ``name``'s schedule price from its step patterns
        (:mod:`estimator.collectives.patterns`) and :meth:`route_bounds`, tighter than
        :meth:`auto_floor` where routes are long. Per step it is α + the step overhead + the
        busiest receiver's reduction + the largest of: any transfer's route latency + its bytes at
        its best bandwidth; the shortest route latency + the busiest sender's (receiver's) bytes at
        :meth:`port_bandwidth`; the shortest route latency + all bytes x links / :meth:`link_capacity`
        (a link carrying at least the average load) or + :meth:`cut_seconds`. Each is at most the slowest transfer of the
        step: tested against the schedule prices. None where there is no pattern or bound. Stops
        summing (returns a partial, still lower, bound) once it exceeds ``limit``."""
        if collective == "p2p" or self.route_bounds(np.zeros(1, np.int64), np.ones(1, np.int64)) is None:
            return None
        try:
            pats = patterns(name, collective, n, self.algo_params(n))
        except EstimatorError:
            return None
        if pats is None:
            return None
        if not pats:
            return 0.0  # one rank: nothing moves
        k = self.chunking(nbytes)
        m = nbytes / k
        p = self.pricing(name)
        if type(self).ranks is LibraryFabric.ranks:  # the default: the first n (no list of n ints)
            ranks, identity = np.arange(n), True
        else:
            ranks = np.asarray(self.ranks(n), dtype=np.int64)
            identity = bool(np.array_equal(ranks, np.arange(n)))
        # long schedules are bounded in two passes: every FIRST_PASS-th step first (a sum over some
        # steps is a lower bound too), the rest only if that does not already exceed ``limit``
        order = list(range(len(pats)))
        passes = ([order[::FIRST_PASS], [i for i in order if i % FIRST_PASS]] if len(pats) >= 4 * FIRST_PASS
                  else [order])
        total = 0.0
        for batch in passes:
            chosen = [pats[i] for i in batch]
            moves, values = self._step_floors(chosen, n, m, p, ranks, identity)
            for pat, moving, step in zip(chosen, moves, values, strict=True):
                total += pat.count * (p.step_overhead_s + (step if moving else 0.0))
            if k * total > limit:
                return k * total
        steps = sum(x.count for x in pats)
        return k * (total + (p.fixed_s if steps else 0.0))

    def _step_floors(self, pats: list, n: int, m: float, p: PricingParams, ranks: np.ndarray, identity: bool
                     ) -> tuple[list[int], list[float]]:
        """Per step of ``pats``: how many transfers move, and α + the slowest-transfer bound + the
        busiest receiver's reduction (see :meth:`pattern_floor`), for a buffer of ``m`` bytes."""
        port, capacity, shortest = self.port_bandwidth(), self.link_capacity(), self.min_route_latency()
        # per step: a step mapped onto itself by a rank shift P that maps the bounds onto themselves
        # too is bounded from its transfers out of ranks 0..P-1 (a receiver gets what its class mod
        # P gets); any other from its sample (a subset of its transfers: every bound only grows with
        # more). All steps' transfers are then bounded at once, per step.
        parts, periods = [], []
        for pat in pats:
            period = pat.period if identity and pat.period and self.shift_invariant(pat.period, n) else 0
            period = period if period <= FOLD_MAX else 0
            src, dst, size, red = pat.first(period) if period else pat.sample()
            moving = src != dst
            parts.append((ranks[src[moving]], ranks[dst[moving]], size[moving], red[moving]))
            periods.append(period)
        lens = np.array([len(x[0]) for x in parts], dtype=np.int64)
        sid = np.repeat(np.arange(len(parts)), lens)  # each transfer's step
        src, dst, size, red = (np.concatenate([x[i] for x in parts]) for i in range(4))
        folds = np.array(periods, dtype=np.int64)
        into = np.where(folds[sid] > 0, dst % np.maximum(folds[sid], 1), dst)  # receiver classes
        lat, bw, links = self.route_bounds(src, dst)  # type: ignore[misc]
        slowest = _per_step(np.maximum, lat + size * m / bw, lens)
        if port:
            busiest = np.maximum(_busiest(sid, src, size, lens), _busiest(sid, into, size, lens))
            slowest = np.maximum(slowest, shortest + busiest * m / port)
        if capacity and links is not None:
            copies = np.where(folds > 0, n // np.maximum(folds, 1), 1)
            volume = np.bincount(sid, weights=size * links, minlength=len(parts))
            slowest = np.maximum(slowest, shortest + copies * volume * m / capacity)
        cut = np.zeros(len(parts))
        if type(self).cut_seconds is not LibraryFabric.cut_seconds:
            for i, (a, b, w, _) in enumerate(parts):
                cut[i] = self.cut_seconds(a, b, w, periods[i]) if len(a) else 0.0
        slowest = np.maximum(slowest, shortest + cut * m)
        reduction = _busiest(sid, into, red, lens) * p.gamma * m
        return lens.tolist(), (p.alpha_s + slowest + reduction).tolist()

    def chunking(self, nbytes: float) -> int:
        """Chunks a collective of ``nbytes`` is cut into (config ``chunks`` / ``chunk_bytes``; 1 if the
        fabric has neither): each runs as a full collective, one after another (ASTRA-sim's
        ``preferred-dataset-splits`` with one active chunk)."""
        chunk_bytes = float(getattr(self.config, "chunk_bytes", 0.0) or 0.0)
        if chunk_bytes > 0 and nbytes > 0:
            return max(1, math.ceil(nbytes / chunk_bytes))
        return max(1, int(getattr(self.config, "chunks", 1) or 1))

    def _price(self, collective: str, name: str, n: int, nbytes: float, explicit: bool,
               fast: tuple[float, int] | None = None) -> CollectiveCost:
        """``fast``: the closed form for ``nbytes`` / chunks when the caller already has it."""
        k = self.chunking(nbytes) if collective != "p2p" else 1
        nbytes_k = nbytes / k
        reconfig = 0.0
        if fast is None and not explicit:
            fast = self.closed_form(collective, name, n, nbytes_k)  # validates as it goes
        if fast is None:
            self.check_algorithm(collective, name, n)
            comp = self._analytic(collective, name, n)  # the same schedule, routed analytically
            if comp is None:
                comp = self.compiled(collective, name, n)
            time_s, steps = comp.time(nbytes_k), comp.steps
            reconfig = comp.reconfig_steps * comp.reconfig_s
        else:
            time_s, steps = fast
        return CollectiveCost(collective, name, n, nbytes, k * time_s, k * steps, k * reconfig)

    def _analytic(self, collective: str, name: str, n: int) -> CompiledSchedule | None:
        key = ("analytic", collective, name, n)
        if key not in self._compiled:
            self._compiled[key] = self.analytic_compiled(collective, name, n)  # type: ignore[index]
        return self._compiled[key]  # type: ignore[index]

    def analytic_compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule | None:
        """The schedule priced by analytic routing (regular topologies override this; equal to
        :meth:`compiled` up to rounding, tested), or None: compile the explicit schedule."""
        return None

    def p2p_time(self, src: int, dst: int, nbytes: float) -> float:
        for ep in (src, dst):
            if not 0 <= ep < self.nodes:
                raise EstimatorError(f"fabric {self.name!r}: no endpoint {ep} (it has {self.nodes})")
        if src == dst:
            return 0.0
        sched = Schedule("p2p", "direct", max(src, dst) + 1, float(nbytes), (Step((Transfer(src, dst, float(nbytes)),)),))
        topo = self.topology("direct")
        return compile_schedule(sched, topo, self.pricing("direct")).time(float(nbytes))


def server_cut_bytes(src: np.ndarray, dst: np.ndarray, size: np.ndarray, per_server: int, period: int = 0) -> float:
    """The most bytes any server of ``per_server`` consecutive ranks sends to, or receives from,
    other servers in a step (``period`` > 0: the step's transfers out of ranks 0..P-1, a receiver
    counted in its class mod P); a fabric's :meth:`LibraryFabric.cut_seconds` divides it by the
    server's uplink capacity."""
    s, d = src // per_server, dst // per_server
    away = s != d
    if not away.any():
        return 0.0
    into = (dst % period) // per_server if period else d
    out = np.bincount(s[away], weights=size[away]).max()
    inn = np.bincount(into[away], weights=size[away]).max()
    return float(max(out, inn))
