"""The shared collective library: algorithms -> explicit schedules -> priced on a topology.

How a fabric uses it (the electrical fabrics in :mod:`estimator.fabrics` are examples):

1. **Topology.** Build a :class:`estimator.topology.Topology` (``add_endpoint``, ``add_switch``,
   ``connect(a, b, bandwidth_Bps, latency_s)``; routing ``shortest`` / ``ecmp`` /
   ``dimension_order``) or use a builder in :mod:`estimator.topology.builders` (star, leaf_spine,
   ring, torus2d, fat_tree, bcube). A circuit or wavelength is just a link with its own capacity:
   e.g. a circuit-switched rack where each GPU splits its egress over k-1 circuits is a star whose
   GPU links carry the per-GPU capacity, or direct GPU-GPU links of bandwidth B/(k-1).
2. **Algorithms.** ``algorithm(name)`` (:mod:`.algorithms`) returns an :class:`~.algorithms.Algorithm`
   with ``schedule(collective, n, nbytes, AlgoParams)`` (explicit :class:`~.schedule.Schedule`:
   steps of concurrent :class:`~.schedule.Transfer` s with bytes and reduction bytes),
   ``switch_cost(collective, n, nbytes, alpha, bw, gamma, AlgoParams)`` (closed form on a
   non-blocking switch, :mod:`.switch_model`) and ``check(collective, n, AlgoParams)``
   (constraints, raising :class:`~estimator.errors.EstimatorError`). Names: ring, bidir_ring,
   binary_tree, double_binary_tree, pipelined_dbt / pipelined_dbt<C> (C chunks per tree, default
   AlgoParams.chunks = 8), recursive_doubling, halving_doubling, radix / radix<k> (radix2, radix4,
   ...), dimwise (BCube/SiPAC, radix from AlgoParams), neighbor_exchange, direct, one_shot, ps,
   pairwise, binomial_tree, scatter_allgather (broadcast), reducescatter_gather (reduce), torus2d,
   hierarchical, hierarchical_tree (ranks per node from
   AlgoParams.local). ``algorithms.names()`` lists them; the docstrings of
   :mod:`.generators` and :mod:`.switch_model` state each schedule and formula with its source.
3. **Pricing.** :func:`~.pricing.compile_schedule` (schedule, topology, :class:`~.pricing.PricingParams`
   with ``alpha_s``, ``memory_bandwidth_Bps``, ``reconfig_s`` per step marked ``reconfigure``,
   ``step_overhead_s``, ``fixed_s``) gives a :class:`~.pricing.CompiledSchedule` whose ``time(M)``
   is microseconds to evaluate; :func:`~.pricing.price_schedule` prices once;
   :func:`~.pricing.mark_reconfigurations` marks steps whose circuits change;
   :func:`~.pricing.merge_concurrent` runs several collectives at once (contention).
4. **Fabric class.** Subclass :class:`estimator.fabrics.library.LibraryFabric`: declare ``OFFERS``
   (``{collective: (algorithm names, default first)}`` — "my algorithms are X, Y, Z"),
   ``build_topology``, ``pricing``, optionally ``algo_params`` (radix, torus dims, ranks per node),
   ``ranks`` (which endpoints a group uses) and ``closed_form`` (a fast path; return ``None`` to use
   the compiled schedule). ``collective_cost(..., algorithm="auto")`` then picks the fastest valid
   algorithm, memoises, and ``explicit=True`` forces the schedule price. Test your closed forms
   against ``explicit=True`` (see tests/test_collectives.py).

NCCL itself: :mod:`.nccl` models how NCCL runs all-reduce, reduce-scatter, all-gather, broadcast
and reduce (ring / tree / NVLS / CollNet x LL / LL128 / Simple, NCCL 2.18.5 tuner constants,
achievable link rates, pipeline fill) and which one its tuner picks; ``nvlink_leafspine`` (and the
``system=`` presets) use it by default.

Sizes follow nccl-tests: ``nbytes`` is the per-rank buffer (all-reduce input, all-gather output).

Pricing model in one paragraph (details in :mod:`.pricing`): steps are sequential; a transfer
takes ``alpha_s`` + its route latency + (max over its links of the bytes all the step's transfers
put on that link / link bandwidth); a step lasts as long as its slowest transfer plus the busiest
rank's reduction (reduce bytes / ``memory_bandwidth_Bps``, free when 0) plus per-step extras.
Example for an optical fabric that reconfigures circuits between steps::

    from estimator.collectives import algorithm, compile_schedule, mark_reconfigurations, PricingParams
    from estimator.topology.builders import star
    sched = mark_reconfigurations(algorithm("radix4").schedule("all_reduce", 64, 1.0))
    comp = compile_schedule(sched, star(64, 300e9), PricingParams(alpha_s=0.7e-6, reconfig_s=3.7e-6))
    seconds = comp.time(64 * 2**20)   # any size, microseconds per call
"""

from estimator.collectives.algorithms import COLLECTIVES, Algorithm, algorithm, collective_name
from estimator.collectives.params import AlgoParams
from estimator.collectives.pricing import (
    CompiledSchedule,
    PricingParams,
    compile_schedule,
    mark_reconfigurations,
    merge_concurrent,
    price_schedule,
)
from estimator.collectives.schedule import Schedule, Step, Transfer

__all__ = [
    "COLLECTIVES", "AlgoParams", "Algorithm", "CompiledSchedule", "PricingParams", "Schedule", "Step", "Transfer",
    "algorithm", "collective_name", "compile_schedule", "mark_reconfigurations", "merge_concurrent", "price_schedule",
]
