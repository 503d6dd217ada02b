"""ZeRO-3 per decoder layer and microbatch: the weights' all-gathers and the gradients'
reduce-scatters of the layer's units, and how much of them the layer's compute hides, as the
framework's engine runs them (``framework.zero3_*``, :mod:`~estimator.parallel.framework`; every
value cited in ``conf/framework/*.yaml``).

* Units (:func:`~estimator.parallel.memory.zero3_units`): the whole layer (FSDP, Megatron-core) or
  each Linear (DeepSpeed fetches per module). A unit is gathered before its forward and again for
  its backward. With full recompute the backward first re-runs the forward: one gather serves both
  when the checkpointed block runs inside its unit (``zero3_max_reuse_params`` null); an engine
  that releases parameters by reuse distance gathers the unit for the recompute and keeps it for
  the backward only if the parameters used in between -- the later units' recompute and backward,
  twice their parameters -- stay under ``zero3_max_reuse_params``; otherwise it gathers it again.
* Overlap, one unit ahead: a unit's gather runs while the previous unit computes, so it is exposed
  beyond the compute of one unit's share of the layer (the layer's compute split by parameters).
  Overlap is not free: NCCL's kernels hold SMs and HBM bandwidth, so the compute they overlap runs
  slower, by ``interference`` (``parallelism.comm_interference``) of the overlapped time.
* Prefetch gated by the live parameters (``zero3_prefetch_below_live``, DeepSpeed v0.3.13-v0.5.4):
  the engine prefetches only when no gather is in flight and the parameters it holds gathered
  (fetched, prefetched, or kept for reuse) are below ``zero3_max_live_params``
  (:func:`prefetched` replays its rule over the unit trace). A unit not prefetched is gathered
  when it is needed, exposed whole; a later prefetch chance at a parameterless module between two
  units (attention's softmax before its output Linear) is not modelled.
  In backward the same links also carry the unit's gradient reduction (in ``reduce_bucket_params``
  buckets, or one per unit): a reduce-scatter, or with ``zero3_grad_collective: all_reduce`` an
  all-reduce of the whole bucket (DeepSpeed 2021: flattened, divided and copied back, 3 x 2 bytes
  of HBM traffic per gradient byte). The first unit of each pass waits for its gather whole
  (:attr:`Zero3Layer.first_gather`, :attr:`Zero3Layer.last_gather`).
* Tensor-list collectives (``zero3_list_collectives``, DeepSpeed v0.3.13-v0.5): every all-gather
  and reduce-scatter costs, besides NCCL's time (priced by the fabric), one eager copy per rank of
  the group on the host (``n x device.launch_s``: c10d copies each slice between the list and its
  flat buffer) and HBM copies on the
  communication stream at the device's memory bandwidth: the zero-filled gather buffer plus every
  slice copied out of c10d's flat buffer (3x the gathered bytes), every gradient slice copied in
  (2x the bytes). An engine whose Python builds the list itself adds ``zero3_gather_host_per_rank_s``
  per rank to each all-gather's host time (DeepSpeed 2021: a ``narrow`` view per rank); an all-reduce
  of a flattened bucket has no list and no per-rank host time.
* Host work between units (``zero3_sync_per_fetch``): an engine that synchronises the device
  before each unit leaves the GPU idle while the host enqueues the next gather, so that host time
  is exposed whole; otherwise the host runs ahead and only host time beyond the unit's compute is.
  A reduce-scatter is enqueued after its unit's backward kernels, so its host time hides behind
  them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from estimator.compute.device import DeviceProfile
from estimator.parallel.framework import Framework
from estimator.parallel.layout import Layout
from estimator.parallel.memory import WEIGHT_BYTES, zero3_units
from estimator.parallel.overlap import behind
from estimator.parallel.spec import TransformerSpec

GATHER_COPIES = 3  # HBM bytes per gathered byte: zero-filled buffer (write) + slice copy-out (read + write)
REDUCE_COPIES = 2  # per reduced byte: slice copy-in (read + write)
ALL_REDUCE_COPIES = 6  # per reduced byte: flatten, divide by the world size, copy back (each read + write)


class Pricer(Protocol):
    def price(self, group: str, collective: str, nbytes: float, size: int, count: float) -> float: ...


@dataclass(frozen=True)
class Zero3Layer:
    fwd_exposed: float  # per layer and microbatch, forward
    bwd_exposed: float  # per layer and microbatch, backward (with its recompute forward)
    first_gather: float  # the forward's first unit, waited for whole (once per stage and microbatch)
    last_gather: float  # the backward's first unit (the layer's last)
    comm: float  # all ZeRO-3 communication of the layer, exposed or not (host time not included)
    gathers: int  # all-gathers of the layer per microbatch
    interference: float = 0.0  # compute slow-down from the overlapped traffic (in fwd/bwd_exposed)


def backward_gathers(units: list[float], fw: Framework, recompute: str) -> list[int]:
    """All-gathers of each unit in the backward pass, its recompute forward included (module docstring)."""
    if recompute != "full" or fw.zero3_max_reuse_params is None:
        return [1] * len(units)
    return [1 + (2 * sum(units[i + 1:]) >= fw.zero3_max_reuse_params) for i in range(len(units))]


Event = tuple[int, int, str]  # (layer, unit, pass): pass f forward, r recompute forward, b backward


def prefetched(units: list[float], fw: Framework, recompute: str) -> dict[str, list[bool]]:
    """Whether each unit's gather of a layer in the middle of the model was prefetched (issued while an
    earlier unit ran), per pass ``f``, ``r`` (recompute forward, when it gathers apart) and ``b``; a
    ``b`` unit kept since its recompute is not gathered, its flag is True. Without the live-parameter
    gate every unit is prefetched (module docstring)."""
    k = len(units)
    if not fw.zero3_prefetch_below_live or fw.zero3_max_live_params is None:
        return {p: [True] * k for p in "frb"}
    separate = recompute == "full" and fw.zero3_max_reuse_params is not None

    def backward_of(layer: int) -> list[Event]:
        rc = [(layer, i, "r") for i in range(k)] if separate else []
        return rc + [(layer, i, "b") for i in reversed(range(k))]

    fwd = _replay([(layer, i, "f") for layer in range(3) for i in range(k)], units, fw)
    bwd = _replay([e for layer in (2, 1, 0) for e in backward_of(layer)], units, fw)
    flags = {**fwd, **bwd}
    return {p: [flags.get((1, i, p), True) for i in range(k)] for p in "frb"}


def _replay(trace: list[Event], units: list[float], fw: Framework) -> dict[Event, bool]:
    """DeepSpeed 2021's PartitionedParameterCoordinator over ``trace`` (runtime/zero/stage3.py at v0.3.13:
    fetch_sub_module, prefetch_next_sub_modules, release_sub_module): per event, was its unit gathered
    before it was needed (prefetched, or kept since an earlier use)."""
    held: dict[tuple[int, int], float] = {}  # gathered or in flight, by (layer, unit)
    flight: set[tuple[int, int]] = set()
    out = {}
    for p, event in enumerate(trace):
        unit = event[:2]
        out[event] = unit in held
        if unit not in held or unit in flight:  # gathered now or waited for: the engine synchronises
            flight.clear()
        held[unit] = units[event[1]]
        if not flight and sum(held.values()) < fw.zero3_max_live_params:
            ahead = 0.0
            for later in trace[p + 1:]:
                if later[:2] not in held:
                    held[later[:2]] = units[later[1]]
                    flight.add(later[:2])
                    ahead += units[later[1]]
                    if ahead >= (fw.zero3_prefetch_params or 0.0):
                        break
        reuse = next((q for q in range(p + 1, len(trace)) if trace[q][:2] == unit), None)
        between = math.inf if reuse is None else sum(units[e[1]] for e in trace[p + 1:reuse])
        if between >= (fw.zero3_max_reuse_params or 0.0):
            del held[unit]
    return out


def zero3_layer(spec: TransformerSpec, L: Layout, fw: Framework, pricer: Pricer, device: DeviceProfile,
                precision: str, grad_bytes: int, fwd: float, bwd: float, rc: float, count: float,
                interference: float = 0.0) -> Zero3Layer:
    """ZeRO-3 of one layer and microbatch (module docstring); ``fwd``, ``bwd`` and ``rc`` are the layer's
    forward, backward and recompute-forward compute, ``count`` the layer-microbatches per step,
    ``interference`` the compute slow-down per second of overlapped communication (module docstring)."""
    units = zero3_units(spec, L, fw.zero3_unit)
    total, size = sum(units), L.dp * L.cp
    b_gathers = backward_gathers(units, fw, L.recompute)
    separate = L.recompute == "full" and fw.zero3_max_reuse_params is not None  # recompute has its own gathers
    lists = fw.zero3_list_collectives
    hbm = device.memory_rate("elementwise", precision)
    host = size * (device.launch_s + fw.zero3_gather_host_per_rank_s) if lists else 0.0  # per all-gather
    reduce_host = size * device.launch_s if lists and fw.zero3_grad_collective == "reduce_scatter" else 0.0

    def gathers_of(u: float) -> int:
        return sum(1 + g for v, g in zip(units, b_gathers, strict=True) if v == u)

    ag = {u: pricer.price("dp", "all_gather", u * WEIGHT_BYTES, size, count * gathers_of(u))
          + (GATHER_COPIES * u * WEIGHT_BYTES / hbm if lists else 0.0) for u in sorted(set(units))}
    reduce = fw.zero3_grad_collective
    if fw.reduce_bucket_params:  # buckets of reduce_bucket_params, each layer's share of them
        bucket = min(fw.reduce_bucket_params, total * sum(L.stage_layers(spec.layers)) / L.pp)
        rs_layer = pricer.price("dp", reduce, bucket * grad_bytes, size, count * total / bucket) * total / bucket
        rs = {u: rs_layer * u / total for u in units}
    else:
        rs = {u: pricer.price("dp", reduce, u * grad_bytes, size, count * units.count(u)) for u in sorted(set(units))}
    copies = ALL_REDUCE_COPIES if reduce == "all_reduce" else REDUCE_COPIES if lists else 0
    rs = {u: t + copies * u * grad_bytes / hbm for u, t in rs.items()}

    def beyond(t: float, window: float) -> float:
        return max(0.0, t - window)

    def host_exposed(window: float) -> float:
        return host if fw.zero3_sync_per_fetch else beyond(host, window)

    slowed = 0.0  # the interference charged over the layer's windows

    def exposed(gather: float, other: float, window: float, ahead: bool) -> float:
        """A gather and the reduction behind it on the same links against their compute window
        (:func:`~estimator.parallel.overlap.behind`); a gather not prefetched is waited for whole."""
        nonlocal slowed
        late, slow = behind(gather + other, window, interference) if ahead else behind(other, window, interference)
        slowed += slow
        return late if ahead else gather + late

    pf = prefetched(units, fw, L.recompute)
    exp_f = exp_b = 0.0
    for i, (u, g) in enumerate(zip(units, b_gathers, strict=True)):
        f_u, b_u, r_u = fwd * u / total, bwd * u / total, rc * u / total
        exp_f += host_exposed(f_u) + exposed(ag[u], 0.0, f_u, pf["f"][i])
        if separate:  # the recompute forward's gather, and the backward's if the unit was released meanwhile
            again = g == 2
            exp_b += host_exposed(r_u) + exposed(ag[u], 0.0, r_u, pf["r"][i])
            exp_b += (host_exposed(b_u) if again else 0.0) + exposed(ag[u] if again else 0.0, rs[u], b_u, pf["b"][i])
        else:
            exp_b += host_exposed(b_u + r_u) + exposed(ag[u], rs[u], b_u + r_u, pf["b"][i])
        exp_b += beyond(reduce_host, b_u)  # the reduce-scatter's host time, behind the unit's backward kernels
    comm = sum((1 + g) * ag[u] + rs[u] for u, g in zip(units, b_gathers, strict=True))
    return Zero3Layer(exp_f, exp_b, ag[units[0]], ag[units[-1]], comm, len(units) + sum(b_gathers), slowed)
