"""Price unfused ("PyTorch") attention on the A100 profile against FlashAttention's Appendix E.6 tables.

Dao et al. 2022, FlashAttention (arXiv 2205.14135v2), E.6: one A100 40 GB, FP16, batch 16, 8 heads of
dim 64, dropout 0.1, padding mask; runtime = mean of 100 calls of the attention alone (no projections).
"PyTorch Attention" there is the flash-attention benchmark's ``attention_ref`` (HazyResearch/flash-attention
benchmarks/benchmark_flash_attention.py, 2022; same padding mask of lengths seq-20 .. seq): ``workload`` below.
Its ops are captured on the meta device with the tool's own cost rules (``estimator.parallel.layer._capture``,
as a ``model.fused_kernels=none`` layer is) and priced by ``estimator.compute.device.node_times``. Usage: python scripts/attention_check.py [--bw GBps] [--k0 K0]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from omegaconf import OmegaConf

from estimator.compute.device import DeviceProfile, node_times

BATCH, HEADS, HEAD_DIM, DROPOUT = 16, 8, 64, 0.1  # E.6 "Setup"
SEQS = (128, 256, 512, 1024, 2048, 4096)
# PyTorch Attention rows (ms) of Tables 9-20, arXiv 2205.14135v2, per sequence length above
PAPER = {
    ("drop+mask", "fwd"): (0.36, 0.34, 0.78, 2.54, 9.33, 36.33),  # Table 9
    ("drop+mask", "bwd"): (0.37, 0.49, 1.66, 5.81, 22.32, 87.67),  # Table 10
    ("drop+mask", "both"): (0.84, 0.86, 2.35, 8.29, 31.75, 124.19),  # Table 11
    ("mask", "fwd"): (0.30, 0.30, 0.63, 1.93, 7.08, 27.45),  # Table 12
    ("mask", "bwd"): (0.44, 0.46, 1.53, 5.33, 20.34, 79.87),  # Table 13
    ("mask", "both"): (0.80, 0.81, 2.08, 7.23, 27.51, 107.58),  # Table 14
    ("drop", "fwd"): (0.26, 0.24, 0.57, 1.80, 6.56, 25.34),  # Table 15
    ("drop", "bwd"): (0.44, 0.35, 0.90, 2.94, 10.77, 41.67),  # Table 16
    ("drop", "both"): (0.66, 0.67, 1.43, 4.82, 17.47, 67.29),  # Table 17
    ("none", "fwd"): (0.21, 0.22, 0.43, 1.27, 4.32, 16.47),  # Table 18
    ("none", "bwd"): (0.26, 0.29, 0.78, 2.44, 8.82, 33.87),  # Table 19
    ("none", "both"): (0.67, 0.70, 1.18, 3.67, 13.22, 50.44),  # Table 20
}
GROUPS = {"matmul": "bmm", "softmax": "softmax"}  # other classes: "elementwise" (scale, mask, dropout)


def workload(seq: int, dropout: float, mask: bool):
    """The paper's standard attention at ``BATCH`` x ``HEADS`` x ``seq`` x ``HEAD_DIM``, forward + backward, as
    the flash-attention benchmark's ``attention_ref`` runs it (module doc): k / sqrt(d), q k^T, masked_fill_ of
    the padded keys, softmax, dropout, probs v; the einsums as ``matmul`` on [b, h, s, d] (the bmm BERT's
    capture records; the einsums' layout copies of q, k, v and the output, each ``s x d``, are left out)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    from estimator.parallel import layer

    class Attention(nn.Module):
        def forward(self, q, k, v):
            scores = torch.matmul(q, (k / HEAD_DIM ** 0.5).transpose(-1, -2))
            if mask:
                pad = torch.empty(q.shape[0], 1, 1, seq, dtype=torch.bool, device=q.device)
                scores = scores.masked_fill_(pad, float("-inf"))
            probs = scores.softmax(-1)
            return torch.matmul(F.dropout(probs, dropout, True) if dropout else probs, v)

    def inputs(b: int):
        return tuple(torch.empty(BATCH * b, HEADS, seq, HEAD_DIM, device="meta", requires_grad=True)
                     for _ in range(3))

    return layer._capture(f"attention-{seq}", Attention(), inputs, "none")


def price(device: DeviceProfile, seq: int, variant: str) -> dict[tuple[str, str], float]:
    """Predicted ms per (phase, group) of one variant ('drop+mask', 'mask', 'drop', 'none')."""
    w = workload(seq, DROPOUT if "drop" in variant else 0.0, "mask" in variant)
    times = node_times(w, device, "fp16")
    out: dict[tuple[str, str], float] = {}
    for node, t in zip(w.nodes, times, strict=True):
        key = (node.phase, GROUPS.get(node.op_class, "elementwise"))
        out[key] = out.get(key, 0.0) + t * 1e3
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bw", type=float, default=None, help="HBM GB/s (A100 40 GB SXM: 1555; default: the yaml's)")
    ap.add_argument("--k0", type=float, default=None, help="override the fp16 matmul_shape k0 (a sensitivity check)")
    ap.add_argument("--device", default=str(Path(__file__).resolve().parents[1] / "conf/device/a100.yaml"))
    args = ap.parse_args(argv)
    for name in ("bw", "k0"):
        value = getattr(args, name)
        if value is not None and (value < 0 or (name == "bw" and value == 0)):
            print(f"error: --{name} must be {'> 0' if name == 'bw' else '>= 0'}, got {value}", file=sys.stderr)
            return 2
    device = DeviceProfile.from_dict(OmegaConf.to_container(OmegaConf.load(args.device)))
    if args.bw:
        device = dataclasses.replace(device, mem_bw_Bps=args.bw * 1e9)
    if args.k0 is not None:
        shapes = tuple((p, dataclasses.replace(m, k0=args.k0) if p == "fp16" else m) for p, m in device.matmul_shape)
        device = dataclasses.replace(device, matmul_shape=shapes)
    k0 = dict(device.matmul_shape)["fp16"].k0
    print(f"device {device.name}, HBM {device.mem_bw_Bps / 1e9:.0f} GB/s, fp16 k0 {k0:g}; B={BATCH} H={HEADS} d={HEAD_DIM}, fp16")
    print("variant    pass  seq  meas_ms  pred_ms  pred/meas  bmm_ms  softmax_ms  elementwise_ms")
    ratios: dict[tuple[str, int], list[float]] = {}
    for variant in ("drop+mask", "mask", "drop", "none"):
        for i, seq in enumerate(SEQS):
            parts = price(device, seq, variant)
            for phase in ("fwd", "bwd", "both"):
                phases = {"fwd": ("forward",), "bwd": ("backward",), "both": ("forward", "backward")}[phase]
                grp = {g: sum(v for (p, gg), v in parts.items() if gg == g and p in phases)
                       for g in ("bmm", "softmax", "elementwise")}
                pred, meas = sum(grp.values()), PAPER[(variant, phase)][i]
                ratios.setdefault((phase, seq), []).append(pred / meas)
                print(f"{variant:10s} {phase:4s} {seq:5d} {meas:8.2f} {pred:8.2f} {pred / meas:9.2f} "
                      f"{grp['bmm']:7.2f} {grp['softmax']:10.2f} {grp['elementwise']:14.2f}")
    for phase in ("fwd", "bwd", "both"):
        for low, label in ((SEQS[0], "all seq"), (1024, "seq >= 1024")):
            r = [x for (p, seq), xs in ratios.items() if p == phase and seq >= low for x in xs]
            rms = (sum((x - 1) ** 2 for x in r) / len(r)) ** 0.5
            print(f"RMS of pred/meas - 1, {phase}, {label} ({len(r)} points): {rms * 100:.1f} %; "
                  f"mean pred/meas {sum(r) / len(r):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
