"""The algorithm registry: name -> per-collective schedule generator and switch closed form.

``algorithm("ring").schedule("all_reduce", n, nbytes, params)`` gives the explicit
:class:`~estimator.collectives.schedule.Schedule`; ``.switch_cost(...)`` the α-β-γ closed form on
a non-blocking switch. ``radix<k>`` names (``radix2``, ``radix4``...) are radix-k halving/doubling
with that k; ``radix`` takes k from :class:`AlgoParams`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from estimator.collectives import broadcasts as bc
from estimator.collectives import generators as gen
from estimator.collectives import switch_model as sw
from estimator.collectives.params import AlgoParams
from estimator.collectives.schedule import Schedule
from estimator.errors import EstimatorError

DEFAULT_PARAMS = AlgoParams()
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "gather", "all_to_all", "p2p")
ALIASES = {"allreduce": "all_reduce", "reducescatter": "reduce_scatter", "allgather": "all_gather",
           "incast": "gather", "alltoall": "all_to_all", "sendrecv": "p2p"}


def collective_name(name: str) -> str:
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in COLLECTIVES:
        raise EstimatorError(f"unknown collective {name!r}; known: {', '.join(COLLECTIVES)}")
    return key


@dataclass(frozen=True)
class Algorithm:
    """One algorithm: for each collective it supports, a schedule generator and (where the
    structure allows) a closed form on a non-blocking switch."""

    name: str
    generators: dict[str, gen.Generator]
    closed_forms: dict[str, sw.ClosedForm]
    fixed_radix: int | None = None
    fixed_chunks: int | None = None
    family: str = ""  # the registry name a parameterised variant (radix4, pipelined_dbt16) belongs to

    @property
    def base(self) -> str:
        return self.family or self.name

    def supports(self, collective: str) -> bool:
        return collective in self.generators

    def _need(self, collective: str) -> None:
        if collective not in self.generators:
            raise EstimatorError(
                f"algorithm {self.name!r} does not implement {collective}; it does: {', '.join(self.generators)}"
            )

    def params(self, p: AlgoParams) -> AlgoParams:
        if self.fixed_radix:
            p = p.with_(radix=self.fixed_radix)
        if self.fixed_chunks:
            p = p.with_(chunks=self.fixed_chunks)
        return p

    def check(self, collective: str, n: int, p: AlgoParams = DEFAULT_PARAMS) -> None:
        """Raise :class:`EstimatorError` if this algorithm cannot run ``collective`` on ``n``."""
        self.switch_cost(collective, n, 1.0, 0.0, 1.0, 0.0, p)

    def schedule(self, collective: str, n: int, nbytes: float, p: AlgoParams = DEFAULT_PARAMS) -> Schedule:
        self._need(collective)
        steps = self.generators[collective](n, float(nbytes), self.params(p)) if n > 1 else []
        return Schedule(collective, self.name, n, float(nbytes), tuple(steps))

    def switch_cost(
        self, collective: str, n: int, nbytes: float, alpha: float, bw: float, gamma: float = 0.0,
        p: AlgoParams = DEFAULT_PARAMS,
    ) -> tuple[float, int]:
        """(seconds, steps) on a non-blocking switch; see :mod:`.switch_model`."""
        self._need(collective)
        if collective not in self.closed_forms:
            raise EstimatorError(f"algorithm {self.name!r} has no closed form for {collective}")
        if n <= 1:
            return 0.0, 0
        return self.closed_forms[collective](n, float(nbytes), alpha, bw, gamma, self.params(p))


RS_AR_AG = ("all_reduce", "reduce_scatter", "all_gather")


def _family(name: str, colls: tuple[str, ...], gfac, cfac, **kw) -> Algorithm:
    return Algorithm(name, {c: gfac(c, **kw) for c in colls}, {c: cfac(c, **kw) for c in colls})


def _single(name: str, coll: str, g, c) -> Algorithm:
    return Algorithm(name, {coll: g}, {coll: c})


def _build() -> dict[str, Algorithm]:
    a = {
        "ring": _family("ring", RS_AR_AG, gen.ring, sw.ring),
        "bidir_ring": Algorithm("bidir_ring", {c: gen.bidir_ring(c) for c in RS_AR_AG}, {c: sw.ring(c) for c in RS_AR_AG}),
        "recursive_doubling": Algorithm(
            "recursive_doubling",
            {"all_reduce": gen.recursive_doubling_all_reduce, "all_gather": gen.radix("all_gather", 2, "recursive_doubling")},
            {"all_reduce": sw.recursive_doubling_all_reduce, "all_gather": sw.radix("all_gather", 2, "recursive_doubling")},
        ),
        "halving_doubling": Algorithm(
            "halving_doubling",
            {c: gen.radix(c, 2, "halving_doubling") for c in RS_AR_AG},
            {c: sw.radix(c, 2, "halving_doubling") for c in RS_AR_AG},
        ),
        "radix": _family("radix", RS_AR_AG, gen.radix, sw.radix),
        "dimwise": Algorithm("dimwise", {c: gen.dimwise(c) for c in RS_AR_AG},
                             {c: sw.radix(c, None, "dimwise") for c in RS_AR_AG}),
        "neighbor_exchange": _family("neighbor_exchange", ("all_reduce", "all_gather"), gen.neighbor_exchange,
                                     sw.neighbor_exchange),
        "direct": _family("direct", ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "gather",
                                     "all_to_all", "p2p"), gen.direct, sw.direct),
        "one_shot": _single("one_shot", "all_reduce", gen.one_shot_all_reduce, sw.one_shot_all_reduce),
        "ps": _single("ps", "all_reduce", gen.ps_all_reduce, sw.ps_all_reduce),
        "pairwise": _single("pairwise", "all_to_all", gen.pairwise_all_to_all, sw.pairwise_all_to_all),
        "binary_tree": _family("binary_tree", ("all_reduce", "reduce", "broadcast"), gen.binary_tree, sw.binary_tree),
        "double_binary_tree": _single("double_binary_tree", "all_reduce", gen.double_binary_tree_all_reduce,
                                      sw.double_binary_tree_all_reduce),
        "binomial_tree": _family("binomial_tree", ("broadcast", "reduce", "gather"), gen.binomial, sw.binomial),
        "torus2d": _family("torus2d", RS_AR_AG, gen.torus2d, sw.torus2d),
        "hierarchical": _single("hierarchical", "all_reduce", gen.hierarchical("all_reduce"),
                                sw.hierarchical("all_reduce")),
        "scatter_allgather": _single("scatter_allgather", "broadcast", gen.scatter_allgather_broadcast,
                                     sw.scatter_allgather_broadcast),
        "reducescatter_gather": _single("reducescatter_gather", "reduce", gen.reducescatter_gather_reduce,
                                        sw.reducescatter_gather_reduce),
        "pipelined_dbt": _single("pipelined_dbt", "all_reduce", gen.pipelined_dbt_all_reduce,
                                 sw.pipelined_dbt_all_reduce),
        "hierarchical_tree": _single("hierarchical_tree", "all_reduce", gen.hierarchical_tree_all_reduce,
                                     sw.hierarchical_tree_all_reduce),
        # broadcasts a baseline's operators would run (see .broadcasts)
        "pipelined_chain": _single("pipelined_chain", "broadcast", bc.pipelined_chain_broadcast,
                                   bc.pipelined_chain_broadcast_cost),
        "pipelined_tree": _single("pipelined_tree", "broadcast", bc.pipelined_tree_broadcast,
                                  bc.pipelined_tree_broadcast_cost),
        "spanning_tree": _single("spanning_tree", "broadcast", bc.spanning_tree_broadcast,
                                 bc.spanning_tree_broadcast_cost),
    }
    return a


_REGISTRY = _build()
_RADIX = re.compile(r"^radix(\d+)$")
_PIPE = re.compile(r"^(pipelined_dbt|pipelined_chain|pipelined_tree)(\d+)$")


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


@cache
def algorithm(name: str) -> Algorithm:
    """The algorithm called ``name`` (``radix4`` = radix-k with k = 4)."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    m = _RADIX.match(name)
    if m:
        k = int(m.group(1))
        if k < 2:
            raise EstimatorError(f"algorithm {name!r}: radix must be >= 2")
        base = _REGISTRY["radix"]
        return Algorithm(name, base.generators, base.closed_forms, fixed_radix=k, family="radix")
    m = _PIPE.match(name)
    if m:
        base = _REGISTRY[m.group(1)]
        return Algorithm(name, base.generators, base.closed_forms, fixed_chunks=max(1, int(m.group(2))),
                         family=m.group(1))
    raise EstimatorError(f"unknown algorithm {name!r}; known: {', '.join(_REGISTRY)}, radix<k>, pipelined_dbt<C>, "
                         "pipelined_chain<C>, pipelined_tree<C>")
