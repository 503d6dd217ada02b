"""GPU kernel bytes of the capture's cost mode (estimator.workloads.capture.kernel_bytes and
cuda_dispatch): views, aliases and allocations move nothing, fills only write, dropout is CUDA's
fused native_dropout (9 B per fp32 element each way) instead of the CPU decomposition."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from estimator.parallel.layer import _priced
from estimator.workloads.capture import cuda_dispatch, kernel_bytes

aten = torch.ops.aten


def by_op(ops, phase):
    out: dict[str, float] = {}
    for o in ops:
        if o.phase == phase and o.mem_bytes:
            out[o.op] = out.get(o.op, 0.0) + o.mem_bytes
    return out


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_dropout_prices_cudas_fused_kernel(device):
    n = 64 * 1024
    x = torch.empty(n, device=device, requires_grad=True)
    with cuda_dispatch():
        fused = _priced(nn.Dropout(0.1).train(), (x,))
    fwd, bwd = by_op(fused, "forward"), by_op(fused, "backward")
    assert fwd == {"aten::native_dropout": 9 * n}  # read 4 B, write 4 B + a 1-byte mask
    assert bwd == {"aten::native_dropout_backward": 9 * n}  # read grad 4 B and mask 1 B, write 4 B
    cpu_path = _priced(nn.Dropout(0.1).train(), (x,))  # without the mode: CPU decomposition
    # empty_like 0 + bernoulli_ 4 (write) + div_ 8 + mul 12 bytes per element
    assert by_op(cpu_path, "forward") == {"aten::dropout": 24 * n}


def test_dropout_is_left_alone_when_cuda_would_not_fuse_it():
    x = torch.empty(1024, device="meta")
    for p, training in ((0.0, True), (0.1, False)):
        with cuda_dispatch():
            assert F.dropout(x, p, training) is x  # ATen returns the input itself
    seen = []

    class Spy(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    with Spy(), cuda_dispatch():
        F.dropout(x, 0.1, True, inplace=True)  # dropout_ takes the decomposed path on CUDA too
    assert "native_dropout" not in seen


def test_matmul_unsafe_view_costs_nothing():
    h, s, d = 4, 256, 32
    q = torch.empty(1, h, s, d, device="meta", requires_grad=True)
    k = torch.empty(1, h, d, s, device="meta", requires_grad=True)

    class QK(nn.Module):
        def forward(self, a, b):
            return torch.matmul(a, b)

    ops = _priced(QK(), (q, k))
    matmul = next(o for o in ops if o.op == "aten::matmul")
    assert matmul.mem_bytes == 4 * (2 * h * s * d + h * s * s)  # bmm in + out; the final _unsafe_view is free


def test_kernel_bytes_rules():
    x = torch.empty(1000, device="meta")
    y = torch.empty(1000, device="meta")
    n = 4000
    assert kernel_bytes(aten.empty_like.default, (x,), {}, torch.empty_like(x)) == 0
    assert kernel_bytes(aten.empty.memory_format, ([1000],), {}, x) == 0
    assert kernel_bytes(aten.view.default, (x, [10, 100]), {}, x.view(10, 100)) == 0
    assert kernel_bytes(aten._unsafe_view.default, (x, [10, 100]), {}, x.view(10, 100)) == 0
    assert kernel_bytes(aten.zeros_like.default, (x,), {}, y) == n  # writes only
    assert kernel_bytes(aten.fill_.Scalar, (x, 1.0), {}, x) == n
    assert kernel_bytes(aten.bernoulli_.float, (x, 0.9), {}, x) == n
    assert kernel_bytes(aten.copy_.default, (x, y), {}, x) == 2 * n  # reads src, writes dst
    assert kernel_bytes(aten.add.Tensor, (x, y), {}, torch.empty_like(x)) == 3 * n
    assert kernel_bytes(aten.add_.Tensor, (x, y), {}, x) == 3 * n  # self read and written, other read
    assert kernel_bytes(aten.add.Tensor, (x, x), {}, torch.empty_like(x)) == 2 * n  # one tensor read once


def test_a_capture_priced_under_an_older_byte_rule_is_stale_and_re_captured(tmp_path, capsys):
    """`estimator estimate` re-captures a zoo trace whose byte rule is not today's (it would
    otherwise estimate with the old bytes); the current rule and imported traces are kept."""
    import dataclasses

    from estimator.commands import estimate as estimate_cmd
    from estimator.config import compose
    from estimator.workloads import io
    from estimator.workloads.capture import MEM_BYTES_RULE, capture_from_config, is_stale

    cfg = compose(["model=lenet5", f"traces_dir={tmp_path}", "fabric.nodes=2"])
    fresh, path = capture_from_config(cfg)
    assert not is_stale(fresh) and fresh.meta["mem_bytes_estimate"] == MEM_BYTES_RULE
    old = dataclasses.replace(fresh, meta={**fresh.meta, "mem_bytes_estimate": "distinct tensor inputs + outputs"})
    assert is_stale(old)
    assert not is_stale(dataclasses.replace(old, source="import:kineto"))
    io.save(old, path)
    estimate_cmd.run(cfg)
    assert "older byte rule: re-capturing model lenet5" in capsys.readouterr().err
    assert io.load(path).meta["mem_bytes_estimate"] == MEM_BYTES_RULE
