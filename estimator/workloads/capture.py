"""Capture one training iteration of a zoo model with ``torch.profiler`` on the CPU.

What is measured and how (each choice is an assumption the estimates inherit):

* The iteration is forward (incl. the loss), ``loss.backward()`` and an optimizer step of
  ``torch.optim.SGD`` (lr 0.01, momentum 0.9, the per-parameter "for-loop" implementation),
  wrapped in ``record_function`` markers that assign every op its phase.
* ``warmup_iters`` untimed iterations run first, then a *cost pass*, then the *timed pass*. Both
  passes are profiled; only top-level aten ops count (an ``aten::`` event without an ``aten::``
  ancestor), so nested events (``conv2d`` -> ``convolution`` -> ``mkldnn_convolution``) are not
  double counted.
* The timed pass gives each op its ``duration_s`` (wall time of the profiler event) and input
  shapes. Under the profiler the per-op overhead is a few microseconds; it is part of the time.
* The cost pass runs the same iteration under a ``TorchDispatchMode`` that prices every kernel
  call: FLOPs by PyTorch's own formulas (``torch.utils.flop_counter.flop_registry``; ops without
  a formula count 0) and the bytes the *GPU* kernel of that call moves (:func:`kernel_bytes`).
  Each price is tagged on the profiler timeline and summed into its top-level op; the passes' op
  sequences are matched per phase by name (ops the matcher cannot pair keep 0 FLOPs and an
  input-shape byte estimate, counted in ``meta.unmatched_ops``).
* GPU bytes, not CPU bytes (the estimate is for a GPU; the capture runs on the CPU or the meta
  device). The rule, per kernel call:

  - views and aliases move nothing: every op whose schema is a view (``func.is_view``:
    ``view``, ``t``, ``permute``, ``expand``, ``detach``...) and ``_unsafe_view`` (a view without
    autograd view tracking, e.g. the last op of ``aten::matmul`` on 3-D/4-D tensors,
    aten/src/ATen/native/LinearAlgebra.cpp ``_matmul_impl``), ``resize_``, ``set_``;
  - allocations move nothing: ``empty``, ``empty_like``, ``new_empty``, ``empty_strided``...;
  - fills and factories only write their output: ``ones``/``zeros``/``full`` and their
    ``*_like``/``new_*`` forms, ``arange``, ``fill_``, ``zero_``, and the in-place random fills
    ``bernoulli_``/``uniform_``/``normal_``/``random_`` (the tensor they fill is not read);
  - ``copy_(dst, src)`` reads ``src`` and writes ``dst``;
  - every other call: bytes of its distinct tensor arguments (read) + bytes of its outputs
    (written), an in-place op's self counted once read and once written;
  - ops registered in ``estimator.compute.megatron_kernels.BYTE_RULES`` (the fused CUDA kernels of
    Megatron-LM) or ``estimator.compute.te_kernels.BYTE_RULES`` / ``te_moe_kernels.BYTE_RULES``
    (Megatron-core / Transformer Engine), used by the decoder-layer capture, use the rule cited there;
  - a capture at its real dtypes (:func:`real_dtypes`: the eager ``sdpa`` decoder layer, bf16 with fp32 casts)
    states every aten kernel's bytes at twice the real bytes, the fp32 capture's units.
* Kernels that are one fused kernel on CUDA but decompose on the CPU are dispatched as on CUDA
  (:func:`cuda_dispatch`, active in every pass). ``F.dropout`` / ``torch.dropout`` in training
  with ``0 < p < 1`` runs ``aten::native_dropout``: ATen's ``dropout`` calls ``native_dropout``
  when ``is_fused_kernel_acceptable`` (a CUDA tensor, 0 < p < 1, non-empty;
  aten/src/ATen/native/Dropout.cpp), and the CUDA kernel (aten/src/ATen/native/cuda/Dropout.cu,
  ``fused_dropout_kernel``) reads the input and writes the output and a 1-byte mask — 9 B per
  fp32 element — where the CPU path (``empty_like``, ``bernoulli_``, ``div_``, ``mul``) moved
  36; its backward ``native_dropout_backward`` reads the gradient and the mask and writes the
  result (9 B, was a 12 B ``mul`` with a 4-byte noise tensor). The in-place ``dropout_`` takes
  the decomposed path on CUDA too and is left alone. The other ops that dominate the
  captured models (conv/linear/matmul and their backward, batch/layer norm and their backward,
  softmax, log-softmax + nll-loss, GeLU, ReLU, max-pool with indices, embedding) are single
  kernels on both back ends with the same operands (the CUDA layer-norm backward makes a second
  pass over its inputs for the weight gradients; not modelled), so they keep the rule above.
  FLOPs are unchanged by all of this.
* Weight traffic: a second cost pass runs at twice the batch. Per op, bytes are affine in the
  batch, ``bytes(b) = w + a*b``, so ``w = 2*bytes(b) - bytes(2b)`` (clipped to ``[0, bytes(b)]``)
  is the traffic that does not grow with the batch — parameters, their gradients, optimizer
  state, normalisation statistics — and becomes the node's ``weight_bytes``. Without it a model
  captured at batch 1 and estimated at 256 would read its weights 256 times.
* Gradient readiness: ``register_post_accumulate_grad_hook`` on every parameter marks the
  timeline when its gradient is final; the gradient's ``ready_node`` is the last top-level
  backward op that started before the mark, ``order`` the order of the marks. A parameter that gets
  no gradient is listed last, ready at the last backward op.
* Nodes are chained in execution order on device 0 (one stream); forward and backward ops scale
  with the batch, optimizer ops do not.
* A re-capture whose content is unchanged leaves the trace file alone (so its timestamp, and every
  Snakemake job downstream of it, stay valid). "Content" is everything but the fields that differ
  between two captures of the same model on the same machine: per-op ``duration_s`` and the
  wall-clock, load and thread-count meta fields in ``VOLATILE_META`` (see :func:`content_digest`). The kept trace's timings
  are an equally valid sample of the same measurement; ``capture.force=true`` rewrites them.
"""

from __future__ import annotations

import datetime as dt
import difflib
import os
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from estimator.compute.gemm_shape import token_attrs
from estimator.errors import EstimatorError
from estimator.files import quiet_stderr
from estimator.workloads.flops import op_class
from estimator.workloads.graph import Gradient, Node, Workload

PHASE_ORDER = ("forward", "backward", "optimizer")
_PHASE_MARK = "## {} ##"
_COST_TAG = "##cost:"
_GRAD_TAG = "##grad:"
OPTIMIZER = {"name": "SGD", "lr": 0.01, "momentum": 0.9, "foreach": False}
FALLBACK_ELEMENT_BYTES = 4  # unmatched ops: float32 inputs assumed
# The byte rule a capture was priced with (meta.mem_bytes_estimate). A trace this project captured
# under another rule is stale: ensure_workload re-captures it instead of estimating with old bytes.
MEM_BYTES_RULE = ("GPU kernel bytes per call (capture.kernel_bytes): distinct tensor inputs + outputs; "
                  "views, aliases, allocations 0; fills write only; dropout as CUDA's fused native_dropout")
# meta fields that change from one capture to the next of the same model on the same machine: wall
# clock, load, and torch's intra-op thread count (Snakemake runs a capture with OMP_NUM_THREADS=1, a
# hand capture uses every core; the ops, shapes, FLOPs and bytes are the same, only timings differ)
VOLATILE_META = ("captured_at", "iteration_wall_s", "capture_wall_s", "load_avg_1min", "torch_threads")


@dataclass
class TopOp:
    """A top-level aten op of one profiled pass."""

    op: str
    phase: str
    start_us: float
    duration_s: float
    input_shapes: tuple[tuple[int, ...], ...]
    flops: float = 0.0
    mem_bytes: float = 0.0
    weight_bytes: float = 0.0
    matched: bool = True
    doubled_shapes: tuple = ()  # input shapes of the same op at twice the batch (set by _weight_bytes)


# ---- the training iteration ----------------------------------------------------------------------
def _iteration(zoo_model, optimizer, args, target) -> None:
    from torch.profiler import record_function

    optimizer.zero_grad(set_to_none=True)
    with record_function(_PHASE_MARK.format("forward")):
        loss = zoo_model.loss_fn(zoo_model.module(*args), target)
    with record_function(_PHASE_MARK.format("backward")):
        loss.backward()
    with record_function(_PHASE_MARK.format("optimizer")):
        optimizer.step()


def _profiled(fn) -> list[Any]:
    """Run ``fn`` under the CPU profiler (shapes recorded); return its event list."""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
    with _quiet_stderr():  # kineto prints start/stop banners to fd 2 at every level
        prof.start()
    try:
        fn()
    finally:
        with _quiet_stderr():
            prof.stop()
    return list(prof.events())


_quiet_stderr = quiet_stderr  # silence file descriptor 2 (C++ logging) for a block


# aten ops (schema names) priced by the rules in the module docstring
ALIAS_OPS = frozenset({"aten::_unsafe_view", "aten::resize_", "aten::set_"})
ALLOCATION_OPS = frozenset({
    "aten::empty", "aten::empty_like", "aten::new_empty", "aten::empty_strided",
    "aten::new_empty_strided", "aten::empty_permuted",
})  # fmt: skip
WRITE_ONLY_OPS = frozenset({
    "aten::ones", "aten::zeros", "aten::full", "aten::ones_like", "aten::zeros_like", "aten::full_like",
    "aten::new_ones", "aten::new_zeros", "aten::new_full", "aten::scalar_tensor", "aten::arange",
    "aten::linspace", "aten::eye", "aten::rand", "aten::randn", "aten::rand_like", "aten::randn_like",
    "aten::randint", "aten::randint_like", "aten::fill_", "aten::zero_", "aten::bernoulli_",
    "aten::uniform_", "aten::normal_", "aten::random_", "aten::exponential_",
})  # fmt: skip
KERNEL_NAMESPACES = ("aten::", "megatron::", "te::", "torchao::")  # top-level ops: aten and the fused Megatron / TE / torchao kernels


def tensor_bytes(tree) -> int:
    """Bytes of the distinct tensors in a pytree (a tensor passed twice counts once)."""
    import torch
    from torch.utils._pytree import tree_flatten

    seen: dict[int, int] = {}
    for t in tree_flatten(tree)[0]:
        if isinstance(t, torch.Tensor):
            seen[id(t)] = t.numel() * t.element_size()
    return sum(seen.values())


_REAL_DTYPES: ContextVar[bool] = ContextVar("real_dtypes", default=False)  # inside real_dtypes(True): fp32-capture units


@contextmanager
def real_dtypes(on: bool = True):
    """Within: the capture runs at the layer's real dtypes (16-bit activations and weights, fp32 where its code casts
    up: the eager ``sdpa`` decoder layer), and :func:`kernel_bytes` states every aten kernel's bytes in the fp32
    capture's units, twice the real bytes (the compute model halves them for 16-bit training), so a 16-bit tensor
    counts as elsewhere and an fp32 one at its real 4 bytes. The fused ops' rules count a 16-bit tensor as its fp32
    capture size (``te_kernels._nbytes``)."""
    token = _REAL_DTYPES.set(on)
    try:
        yield
    finally:
        _REAL_DTYPES.reset(token)


def kernel_bytes(func, args: tuple, kwargs: dict, out) -> int:
    """Bytes the GPU kernel of one dispatched call ``func(*args, **kwargs) -> out`` moves (rules:
    module docstring)."""
    from estimator.compute.megatron_kernels import BYTE_RULES
    from estimator.compute.te_kernels import BYTE_RULES as TE_BYTE_RULES
    from estimator.compute.te_moe_kernels import BYTE_RULES as MOE_BYTE_RULES
    from estimator.compute.torchao_kernels import BYTE_RULES as TORCHAO_BYTE_RULES

    name = func._schema.name
    if func.is_view or name in ALIAS_OPS or name in ALLOCATION_OPS:
        return 0
    rule = (BYTE_RULES.get(name) or TE_BYTE_RULES.get(name) or MOE_BYTE_RULES.get(name)
            or TORCHAO_BYTE_RULES.get(name))
    if rule is not None:
        return rule(args, kwargs, out)
    units = 2 if _REAL_DTYPES.get() else 1  # real_dtypes(): fp32-capture units
    if name in WRITE_ONLY_OPS:
        return units * tensor_bytes(out)
    if name == "aten::copy_":
        return units * (tensor_bytes(args[1]) + tensor_bytes(out))
    return units * (tensor_bytes((args, kwargs)) + tensor_bytes(out))


def _cost_mode():
    """A dispatch mode that tags every kernel call with its FLOPs and GPU bytes moved."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    import estimator.compute.megatron_kernels  # noqa: F401  (registers the megatron:: ops)
    import estimator.compute.te_kernels  # noqa: F401  (registers the te:: ops and their FLOP formulas)
    import estimator.compute.te_moe_kernels  # noqa: F401  (registers the te:: MoE token permutations)
    import estimator.compute.torchao_kernels  # noqa: F401  (registers the torchao:: float8 casts)

    class CostMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(func._overloadpacket)
            flops = int(formula(*args, **kwargs, out_val=out)) if formula else 0
            nbytes = kernel_bytes(func, args, kwargs, out)
            with torch.profiler.record_function(f"{_COST_TAG}{flops}:{nbytes}"):
                pass
            return out

    return CostMode()


def cuda_dispatch():
    """A ``TorchFunctionMode`` that sends the calls ATen runs as one fused kernel on CUDA to that
    kernel on any device: training-mode out-of-place dropout with ``0 < p < 1`` ->
    ``torch.native_dropout`` (module docstring). Everything else runs unchanged."""
    import torch
    from torch.nn import functional as F
    from torch.overrides import TorchFunctionMode

    def dropout_args(func, args, kwargs):
        if func is F.dropout:
            names, defaults = ("input", "p", "training", "inplace"), (None, 0.5, True, False)
        else:  # torch.dropout(input, p, train)
            names, defaults = ("input", "p", "train"), (None, None, None)
        bound = dict(zip(names, defaults, strict=True))
        bound.update(zip(names, args, strict=False))
        bound.update(kwargs)
        train = bound.get("training", bound.get("train"))
        return bound["input"], bound["p"], bool(train) and not bound.get("inplace", False)

    class CudaDispatch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is F.dropout or func is torch.dropout:
                x, p, fused = dropout_args(func, args, kwargs)
                if fused and 0 < p < 1 and x.numel() > 0:
                    return torch.native_dropout(x, p, True)[0]
            return func(*args, **kwargs)

    return CudaDispatch()


# ---- reading the profiler timeline -----------------------------------------------------------------
def _is_aten(ev) -> bool:
    return ev.name.startswith(KERNEL_NAMESPACES)


def _top_aten_ancestor(ev):
    top, parent = None, ev.cpu_parent
    while parent is not None:
        if _is_aten(parent):
            top = parent
        parent = parent.cpu_parent
    return top


def _phase_windows(events) -> list[tuple[float, float, str]]:
    marks = {_PHASE_MARK.format(p): p for p in PHASE_ORDER}
    windows = [(ev.time_range.start, ev.time_range.end, marks[ev.name]) for ev in events if ev.name in marks]
    found = {w[2] for w in windows}
    if found != set(PHASE_ORDER):
        raise RuntimeError(f"profiler trace lacks phase markers {sorted(set(PHASE_ORDER) - found)}")
    return windows


def _phase_of(start: float, windows) -> str | None:
    for lo, hi, phase in windows:
        if lo <= start <= hi:
            return phase
    return None


def _shapes(raw) -> tuple[tuple[int, ...], ...]:
    out: list[tuple[int, ...]] = []
    for entry in raw or ():
        if entry and all(isinstance(x, list | tuple) for x in entry):  # a tensor list
            out.extend(tuple(int(d) for d in s) for s in entry)
        elif all(isinstance(x, int) for x in entry):
            out.append(tuple(entry))
    return tuple(out)


def _top_ops(events) -> dict[int, TopOp]:
    """Top-level aten ops inside the phase markers, keyed by the profiler event id."""
    windows = _phase_windows(events)
    ops: dict[int, TopOp] = {}
    for ev in events:
        if not _is_aten(ev) or _top_aten_ancestor(ev) is not None:
            continue
        phase = _phase_of(ev.time_range.start, windows)
        if phase is None:
            continue
        ops[ev.id] = TopOp(
            op=ev.name,
            phase=phase,
            start_us=ev.time_range.start,
            duration_s=max(ev.time_range.elapsed_us(), 0) * 1e-6,
            input_shapes=_shapes(ev.input_shapes),
        )
    return ops


def _sorted(ops: dict[int, TopOp]) -> list[TopOp]:
    rank = {p: i for i, p in enumerate(PHASE_ORDER)}
    return sorted(ops.values(), key=lambda o: (rank[o.phase], o.start_us))


def _priced_ops(events) -> list[TopOp]:
    """Top-level ops of the cost pass with the FLOPs/bytes of the kernels they contain."""
    ops = _top_ops(events)
    for ev in events:
        if ev.name.startswith(_COST_TAG):
            top = _top_aten_ancestor(ev)
            if top is not None and top.id in ops:
                flops, nbytes = ev.name[len(_COST_TAG) :].split(":")
                ops[top.id].flops += float(flops)
                ops[top.id].mem_bytes += float(nbytes)
    return _sorted(ops)


def _transfer_costs(timed: list[TopOp], priced: list[TopOp]) -> int:
    """Copy FLOPs/bytes from the cost pass onto the timed pass, phase by phase; return how many
    timed ops found no partner (they get 0 FLOPs and an input-bytes estimate).

    Ops pair up by (name, input shapes): first in sequence order (``difflib``), then leftovers with
    any unused op of equal key (autograd may run independent branches in another order)."""
    unmatched = 0
    for phase in PHASE_ORDER:
        a = [o for o in timed if o.phase == phase]
        b = [o for o in priced if o.phase == phase]
        keys_a, keys_b = [_match_key(o) for o in a], [_match_key(o) for o in b]
        matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
        pairs = {i + k: j + k for i, j, size in matcher.get_matching_blocks() for k in range(size)}
        spare: dict[tuple, list[int]] = {}
        for j in sorted(set(range(len(b))) - set(pairs.values()), reverse=True):
            spare.setdefault(keys_b[j], []).append(j)
        for i in range(len(a)):
            if i not in pairs and spare.get(keys_a[i]):
                pairs[i] = spare[keys_a[i]].pop()
        for i, o in enumerate(a):
            if i in pairs:
                o.flops, o.mem_bytes, o.weight_bytes = b[pairs[i]].flops, b[pairs[i]].mem_bytes, b[pairs[i]].weight_bytes
                o.doubled_shapes = b[pairs[i]].doubled_shapes
            else:
                o.matched = False
                o.mem_bytes = FALLBACK_ELEMENT_BYTES * sum(_numel(s) for s in o.input_shapes)
                unmatched += 1
    return unmatched


def _weight_bytes(priced: list[TopOp], doubled: list[TopOp]) -> int:
    """Set ``weight_bytes`` of the ops of ``priced`` (batch b) from the same ops priced at batch 2b:
    ``2*bytes(b) - bytes(2b)``, clipped to ``[0, bytes(b)]`` (and ``doubled_shapes``, the partner's shapes). Ops pair up per phase by name in
    sequence order; return how many found no partner (they keep weight_bytes 0)."""
    unpaired = 0
    for phase in PHASE_ORDER:
        a = [o for o in priced if o.phase == phase]
        b = [o for o in doubled if o.phase == phase]
        matcher = difflib.SequenceMatcher(None, [o.op for o in a], [o.op for o in b], autojunk=False)
        pairs = {i + k: j + k for i, j, size in matcher.get_matching_blocks() for k in range(size)}
        for i, o in enumerate(a):
            if i in pairs:
                o.weight_bytes = min(max(2 * o.mem_bytes - b[pairs[i]].mem_bytes, 0.0), o.mem_bytes)
                o.doubled_shapes = b[pairs[i]].input_shapes
            else:
                unpaired += 1
    return unpaired


def _match_key(o: TopOp) -> tuple:
    """In-place and out-of-place variants pair up: the cost pass's dispatch mode keeps extra
    references, so autograd accumulates some gradients with ``add`` instead of ``add_``."""
    return o.op.rstrip("_"), o.input_shapes


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _gradients(events, params, backward_starts: list[tuple[float, int]]) -> tuple[Gradient, ...]:
    """Gradient records from the ``##grad:<index>`` marks of the timed pass."""
    import bisect

    marks = sorted(
        (ev.time_range.start, int(ev.name[len(_GRAD_TAG) :]))
        for ev in events
        if ev.name.startswith(_GRAD_TAG)
    )
    starts = [s for s, _ in backward_starts]
    last_backward = backward_starts[-1][1]
    grads: list[Gradient] = []
    seen: set[int] = set()
    for t, index in marks:
        if index in seen:  # a parameter accumulated twice keeps its final mark
            grads = [g for g in grads if g.name != params[index][0]]
        seen.add(index)
        pos = bisect.bisect_right(starts, t) - 1
        ready = backward_starts[max(pos, 0)][1]
        name, p = params[index]
        grads.append(Gradient(name, p.numel() * p.element_size(), ready, 0))
    for index, (name, p) in enumerate(params):
        if index not in seen:
            grads.append(Gradient(name, p.numel() * p.element_size(), last_backward, 0))
    return tuple(Gradient(g.name, g.nbytes, g.ready_node, k) for k, g in enumerate(grads))


# ---- the capture ---------------------------------------------------------------------------------------
def capture(
    zoo_model, batch: int, warmup_iters: int = 1, seed: int = 0, model_cfg: dict | None = None
) -> Workload:
    """Profile one training iteration of ``zoo_model`` at ``batch`` on the CPU; return the Workload."""
    import torch

    from estimator.workloads.zoo import count_params

    if batch < 1:
        raise EstimatorError(f"capture.batch must be a positive integer, got {batch!r}")
    if warmup_iters < 0:
        raise EstimatorError(f"capture.warmup_iters must be >= 0, got {warmup_iters!r}")
    torch.manual_seed(seed)
    module = zoo_model.module.train()
    optimizer = torch.optim.SGD(
        module.parameters(), lr=OPTIMIZER["lr"], momentum=OPTIMIZER["momentum"], foreach=OPTIMIZER["foreach"]
    )
    args, target = zoo_model.make_inputs(batch, "cpu")

    def step() -> None:
        _iteration(zoo_model, optimizer, args, target)

    t0 = time.perf_counter()
    with cuda_dispatch():  # every pass dispatches what CUDA would (module docstring)
        for _ in range(warmup_iters):
            step()
        with _cost_mode():
            priced = _priced_ops(_profiled(step))
        args2, target2 = zoo_model.make_inputs(2 * batch, "cpu")
        with _cost_mode():
            doubled = _priced_ops(_profiled(lambda: _iteration(zoo_model, optimizer, args2, target2)))
        unpaired_weight_ops = _weight_bytes(priced, doubled)

        params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        handles = [p.register_post_accumulate_grad_hook(_grad_marker(i)) for i, (_, p) in enumerate(params)]
        try:
            wall0 = time.perf_counter()
            events = _profiled(step)
            iteration_s = time.perf_counter() - wall0
        finally:
            for h in handles:
                h.remove()
    timed = _sorted(_top_ops(events))
    unmatched = _transfer_costs(timed, priced)

    nodes = tuple(
        Node(
            id=i,
            name=o.op,
            deps=(i - 1,) if i else (),
            op=o.op,
            op_class=op_class(o.op, o.phase),
            phase=o.phase,
            flops=float(o.flops),
            mem_bytes=float(o.mem_bytes),
            weight_bytes=float(o.weight_bytes),
            duration_s=o.duration_s,
            input_shapes=o.input_shapes,
            scales_with_batch=o.phase != "optimizer",
            attrs=token_attrs(o.op, o.input_shapes, o.doubled_shapes) if op_class(o.op, o.phase) == "matmul" else {},
        )
        for i, o in enumerate(timed)
    )
    backward_starts = [(o.start_us, i) for i, o in enumerate(timed) if o.phase == "backward"]
    if not backward_starts:
        raise RuntimeError("profiler trace has no backward ops")
    gradients = _gradients(events, params, backward_starts)
    forward = sum(n.flops for n in nodes if n.phase == "forward")
    meta = {
        "torch_version": torch.__version__,
        "captured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "model": dict(model_cfg or {}),
        "seq_len": zoo_model.info.get("seq_len"),
        "optimizer": dict(OPTIMIZER),
        "warmup_iters": warmup_iters,
        "seed": seed,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_avg_1min": os.getloadavg()[0],  # durations are only as quiet as the machine was
        "iteration_wall_s": iteration_s,
        "capture_wall_s": time.perf_counter() - t0,
        "unmatched_ops": unmatched,
        "weight_bytes_unpaired_ops": unpaired_weight_ops,
        "core_params": count_params(zoo_model.core),
        "flops_counter": "torch.utils.flop_counter.flop_registry",
        "mem_bytes_estimate": MEM_BYTES_RULE,
        "weight_bytes_estimate": "2*bytes(batch) - bytes(2*batch) per op (cost passes at batch and 2*batch)",
    }
    return Workload(
        name=zoo_model.name,
        nodes=nodes,
        source="capture:torch.profiler",
        devices=1,
        batch_size=batch,
        capture_device="cpu",
        params=count_params(module),
        forward_flops=float(forward),
        gradients=gradients,
        meta=meta,
    ).validate()


def _grad_marker(index: int):
    from torch.profiler import record_function

    def hook(_param) -> None:
        with record_function(f"{_GRAD_TAG}{index}"):
            pass

    return hook


# ---- config-level entry points -------------------------------------------------------------------
def trace_path(cfg) -> Path:
    """``<traces_dir>/<model.name>.workload.json`` for a composed config (where captures go)."""
    from estimator.workloads.io import SUFFIX

    return Path(str(cfg.traces_dir)) / f"{cfg.model.name}{SUFFIX}"


def existing(path: Path) -> Path | None:
    """``path`` if it exists, also looked up from the repository root (see
    :func:`estimator.files.resolve_input`); else None."""
    from estimator.files import resolve_input

    found = resolve_input(path)
    return found if found.is_file() else None


def summary(workload: Workload) -> dict[str, Any]:
    """Headline numbers of a workload (per-sample forward FLOPs)."""
    return {
        "name": workload.name,
        "batch_size": workload.batch_size,
        "ops": len(workload.compute_nodes()),
        "params": workload.params,
        "forward_flops": workload.forward_flops / workload.batch_size,
        "gradient_bytes": workload.gradient_bytes,
        "capture_wall_s": workload.meta.get("capture_wall_s", 0.0),
    }


def content_digest(workload: Workload) -> str:
    """SHA-256 of the workload without its volatile parts (per-op measured durations and the
    ``VOLATILE_META`` fields): equal for two captures of the same model, batch, seed, torch
    version and machine whatever torch's thread count (the CPU count stays in), different when any
    op, shape, FLOP or byte count, gradient or setting differs."""
    import hashlib
    import json

    doc = workload.to_dict()
    doc["nodes"] = [{k: v for k, v in n.items() if k != "duration_s"} for n in doc["nodes"]]
    doc["meta"] = {k: v for k, v in (doc.get("meta") or {}).items() if k not in VOLATILE_META}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _same_content(workload: Workload, path: Path) -> bool:
    """True when ``path`` holds a readable trace with ``workload``'s content digest."""
    from estimator.workloads import io

    if not path.is_file():
        return False
    try:
        return content_digest(io.load(path)) == content_digest(workload)
    except EstimatorError:  # unreadable or corrupt: the new capture replaces it
        return False


def capture_from_config(cfg) -> tuple[Workload, Path]:
    """Build ``cfg.model``, capture it with ``cfg.capture`` settings and save it atomically
    (see :func:`capture_to_file`)."""
    workload, path, _written = capture_to_file(cfg)
    return workload, path


def capture_to_file(cfg) -> tuple[Workload, Path, bool]:
    """Capture as :func:`capture_from_config` does; the trace is written atomically unless the
    one already there has the same content (:func:`content_digest`) and ``capture.force`` is
    false. Returns (workload, path, written)."""
    from estimator.config import to_container
    from estimator.workloads import io, zoo

    model_cfg = to_container(cfg.model)
    cap = to_container(cfg.capture)
    batch = cap.get("batch")
    if batch is None:
        batch = model_cfg.get("capture_batch", 1)
    for key, value in (("capture.batch", batch), ("capture.warmup_iters", cap.get("warmup_iters", 1))):
        if isinstance(value, bool) or not isinstance(value, int):
            raise EstimatorError(f"{key} must be an integer, got {value!r}")
    seed = cap.get("seed", 0)
    force = cap.get("force", False)
    if not isinstance(force, bool):
        raise EstimatorError(f"capture.force must be true or false, got {force!r}")
    workload = capture(zoo.build(model_cfg), batch, cap.get("warmup_iters", 1), seed, model_cfg)
    path = trace_path(cfg)
    if not force and _same_content(workload, path):
        return workload, path, False
    try:
        io.save(workload, path)
    except OSError as exc:
        raise EstimatorError(f"{path}: cannot write workload ({exc.strerror or exc})") from None
    return workload, path, True


def ensure_workload(cfg, announce=None) -> tuple[Workload, Path]:
    """The workload for ``cfg``: ``cfg.workload`` if set, else the model's trace in
    ``traces_dir``, captured first when missing (``announce(message)`` is told so)."""
    from estimator.workloads import io

    if cfg.get("workload"):
        given = Path(str(cfg.workload))
        path = existing(given) or given
        return io.load(path), path
    found = existing(trace_path(cfg))
    path = trace_path(cfg)
    if found is not None:
        workload = io.load(found)
        if not is_stale(workload):
            return workload, found
        why = f"{found} was captured with an older byte rule: re-capturing model {cfg.model.name}"
    else:
        why = f"{path} not found: capturing model {cfg.model.name} first"
    if announce is not None:
        announce(why)
    return capture_from_config(cfg)


def is_stale(workload: Workload) -> bool:
    """True for a zoo capture priced under another byte rule than :data:`MEM_BYTES_RULE` (imported
    traces and other sources are never stale)."""
    if not workload.source.startswith("capture:torch.profiler") or workload.capture_device == "meta":
        return False
    return (workload.meta or {}).get("mem_bytes_estimate") != MEM_BYTES_RULE
