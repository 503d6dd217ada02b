"""Robustness audit of "the obvious command" (docs/research/h96-obvious-commands.md).

Runs the commands a reviewer types first for published large-model runs (a system preset,
fabric.nodes = GPUs, a model preset, parallelism=hybrid, a precision, tp/pp/cp/ep/virtual_stages,
micro / global batch, seq_len, maybe a framework or recompute), a few odd but legal layouts and
the bad inputs a newcomer types, each through the CLI in a fresh process, and prints one markdown
table: exit code, wall seconds, whether stderr holds a traceback, the one-line error of a refusal,
and for an accepted run iter_time_s, mfu, memory_total_bytes against the device's capacity and
the layout label. The last column flags what the audit counts as a defect (a traceback, an exit
code other than 0 / 2, mfu outside (0, 1), a non-finite or non-positive time, memory above the
device accepted, a run slower than 60 s, a bad input accepted).

This is not an accuracy check: no published throughput is compared, and the estimate's
validation lines are dropped before anything is printed.

    python scripts/obvious_commands.py                 # every command (~10-15 min on 2 cores)
    python scripts/obvious_commands.py --only 8b,bad   # commands whose id contains 8b or bad
    python scripts/obvious_commands.py --json out.json # also the raw records
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # the shared harness beside this script, also when a test loads it by path
from cli_audit import TRACEBACK, error_line, finish, note, outcome_flags, parse_args, run_cli  # noqa: E402

H = "parallelism=hybrid"


def _p(**kw: object) -> list[str]:
    """``parallelism.<key>=<value>`` overrides."""
    return [f"parallelism.{k}={v}" for k, v in kw.items()]


def cmd(system: str, gpus: int, model: str, precision: str = "bf16", seq: int | None = None, **kw: object) -> list[str]:
    args = [f"system={system}", f"fabric.nodes={gpus}", f"model={model}", H, f"precision={precision}"]
    if seq is not None:
        args.append(f"model.seq_len={seq}")
    framework = kw.pop("framework", None)
    if framework:
        args.append(f"framework={framework}")
    return args + _p(**kw)


#: (id, overrides, expect): expect "ok" = should run, "err" = should be refused, "any" = either is defensible
COMMANDS: list[tuple[str, list[str], str]] = [
    # --- dense Llama / Mistral
    ("l3-8b-h100-8-fsdp", cmd("dgx_h100", 8, "llama3_8b", seq=8192, framework="fsdp", zero=3, micro_batch_size=1, global_batch=32), "ok"),
    ("l3-8b-h100-8-fsdp-only", cmd("dgx_h100", 8, "llama3_8b", seq=8192, framework="fsdp", global_batch=32), "ok"),
    ("l3-8b-h100-8-default", cmd("dgx_h100", 8, "llama3_8b", seq=8192, tp=1, pp=1, micro_batch_size=1, global_batch=128), "ok"),
    ("l3-8b-h100-8-fp8", cmd("dgx_h100", 8, "llama3_8b", "fp8", seq=8192, tp=1, pp=1, micro_batch_size=1, global_batch=128), "ok"),
    ("l3-8b-h200-64-fp8-rc", cmd("dgx_h200", 64, "llama3_8b", "fp8", seq=8192, tp=1, pp=1, global_batch=128, recompute="full"), "ok"),
    ("l3-8b-h100-8-ds", cmd("dgx_h100", 8, "llama3_8b", seq=8192, framework="deepspeed", zero=3, global_batch=64), "ok"),
    ("l3-8b-a100-8-fsdp", cmd("dgx_a100", 8, "llama3_8b", seq=8192, framework="fsdp", zero=3, global_batch=32), "ok"),
    ("l3-8b-a100-fp8", cmd("dgx_a100", 8, "llama3_8b", "fp8", seq=8192, tp=1, pp=1, global_batch=128), "err"),
    ("l3-70b-h100-1024-tp4pp4cp2", cmd("dgx_h100", 1024, "llama3_70b", seq=8192, tp=4, pp=4, cp=2, virtual_stages=5, global_batch=512), "ok"),
    ("l3-70b-h100-1024-fp8", cmd("dgx_h100", 1024, "llama3_70b", "fp8", seq=8192, tp=4, pp=4, cp=2, virtual_stages=5, global_batch=512), "ok"),
    ("l3-70b-h100-512-rcfull", cmd("dgx_h100", 512, "llama3_70b", seq=8192, tp=4, pp=4, cp=2, virtual_stages=5, global_batch=512, recompute="full"), "ok"),
    ("l3-70b-h100-512-novs", cmd("dgx_h100", 512, "llama3_70b", seq=8192, tp=4, pp=4, cp=2, global_batch=512), "ok"),
    ("l3-70b-h200-512-fp8", cmd("dgx_h200", 512, "llama3_70b", "fp8", seq=8192, tp=2, pp=4, cp=2, virtual_stages=5, global_batch=512), "ok"),
    ("l3-70b-h100-256-fsdp", cmd("dgx_h100", 256, "llama3_70b", seq=8192, framework="fsdp", zero=3, global_batch=256), "ok"),
    ("l3-70b-h100-256-fsdp-tp8", cmd("dgx_h100", 256, "llama3_70b", seq=8192, framework="fsdp", zero=3, tp=8, global_batch=256), "ok"),
    ("l3-70b-h100-512-ds", cmd("dgx_h100", 512, "llama3_70b", seq=8192, framework="deepspeed", tp=8, pp=4, global_batch=512), "ok"),
    ("l3-405b-h100-8192", cmd("dgx_h100", 8192, "llama3_405b", seq=8192, tp=8, pp=16, cp=2, global_batch=2048), "ok"),
    ("l3-405b-h100-16384", cmd("dgx_h100", 16384, "llama3_405b", seq=8192, tp=8, pp=16, cp=2, global_batch=2048), "ok"),
    ("l3-405b-h100-16384-vs", cmd("dgx_h100", 16384, "llama3_405b", seq=8192, tp=8, pp=16, cp=2, virtual_stages=4, global_batch=2048), "any"),
    ("l3-405b-h100-1024-fp8", cmd("dgx_h100", 1024, "llama3_405b", "fp8", seq=8192, tp=8, pp=8, cp=2, virtual_stages=8, global_batch=512), "any"),
    ("l3-405b-h800-2048", cmd("dgx_h800", 2048, "llama3_405b", seq=8192, tp=8, pp=16, global_batch=1024), "ok"),
    ("l2-70b-h100-512-fsdp", cmd("dgx_h100", 512, "llama2_70b", seq=4096, framework="fsdp", zero=3, global_batch=512), "ok"),
    ("l2-70b-a100-256-tp8pp4", cmd("dgx_a100", 256, "llama2_70b", seq=4096, tp=8, pp=4, global_batch=512), "ok"),
    ("l2-7b-a100-64-fsdp", cmd("dgx_a100", 64, "llama2_7b", seq=4096, framework="fsdp", zero=3, global_batch=256), "ok"),
    ("l2-13b-h100-64", cmd("dgx_h100", 64, "llama2_13b", seq=4096, tp=2, pp=1, global_batch=256), "ok"),
    ("mistral-7b-h100-8-fsdp", cmd("dgx_h100", 8, "mistral_7b", seq=4096, framework="fsdp", zero=3, global_batch=64), "ok"),
    # --- GPT-3 / Megatron / Nemotron
    ("gpt3-175b-a100-1024", cmd("dgx_a100", 1024, "gpt3_175b", seq=2048, tp=8, pp=8, global_batch=1536), "ok"),
    ("gpt3-175b-a100-1024-vs", cmd("dgx_a100", 1024, "gpt3_175b", seq=2048, tp=8, pp=8, virtual_stages=3, global_batch=1536), "ok"),
    ("gpt3-175b-h100-512-fp8", cmd("dgx_h100", 512, "gpt3_175b", "fp8", seq=2048, tp=4, pp=8, virtual_stages=12, global_batch=2048), "ok"),
    ("gpt3-175b-a100-1024-ds", cmd("dgx_a100", 1024, "gpt3_175b", seq=2048, framework="deepspeed", tp=8, pp=8, global_batch=1536), "ok"),
    ("gpt3-5b-a100-64", cmd("dgx_a100", 64, "gpt3_5b", seq=2048, tp=2, pp=1, global_batch=512), "ok"),
    ("gpt3-13b-h100-64", cmd("dgx_h100", 64, "gpt3_13b", seq=2048, tp=2, pp=1, global_batch=512), "ok"),
    ("gpt3-20b-h100-64-fp8", cmd("dgx_h100", 64, "gpt3_20b", "fp8", seq=2048, tp=4, pp=1, global_batch=512), "ok"),
    ("mgpt-1t-a100-3072", cmd("dgx_a100", 3072, "megatron_gpt", seq=2048, tp=8, pp=64, global_batch=3072), "ok"),
    ("nemo4-15b-h100-64", cmd("dgx_h100", 64, "nemotron4_15b", seq=4096, tp=4, pp=1, global_batch=256), "ok"),
    ("nemo4-340b-h100-6144", cmd("dgx_h100", 6144, "nemotron4_340b", seq=4096, tp=8, pp=12, virtual_stages=8, global_batch=768), "ok"),
    ("nemo4-340b-h100-512-fp8", cmd("dgx_h100", 512, "nemotron4_340b", "fp8", seq=4096, tp=8, pp=8, virtual_stages=12, global_batch=512), "ok"),
    # --- MoE
    ("mixtral-8x7b-h100-64", cmd("dgx_h100", 64, "mixtral_8x7b", seq=4096, tp=1, pp=4, ep=8, global_batch=256), "ok"),
    ("mixtral-8x7b-h100-64-fw", cmd("dgx_h100", 64, "mixtral_8x7b", seq=4096, framework="megatron", tp=1, pp=4, ep=8, global_batch=256), "ok"),
    ("mixtral-8x22b-h100-256", cmd("dgx_h100", 256, "mixtral_8x22b", seq=4096, tp=2, pp=8, ep=8, global_batch=256), "ok"),
    ("mixtral-8x22b-h100-256-fp8", cmd("dgx_h100", 256, "mixtral_8x22b", "fp8", seq=4096, tp=2, pp=8, ep=8, global_batch=256), "ok"),
    ("dsv3-h800-2048-pp16ep64", cmd("dgx_h800", 2048, "deepseek_v3", "fp8", seq=4096, tp=1, pp=16, ep=64, global_batch=15360), "ok"),
    ("dsv3-h800-2048-bf16", cmd("dgx_h800", 2048, "deepseek_v3", seq=4096, tp=1, pp=16, ep=64, global_batch=8192), "ok"),
    ("dsv3-h100-1024-tp2", cmd("dgx_h100", 1024, "deepseek_v3", seq=4096, tp=2, pp=16, ep=64, global_batch=8192), "ok"),
    ("dsv3-h100-1024-rc", cmd("dgx_h100", 1024, "deepseek_v3", seq=4096, tp=1, pp=16, ep=64, global_batch=8192, recompute="full"), "ok"),
    ("dsv2lite-h100-16", cmd("dgx_h100", 16, "deepseek_v2_lite", seq=4096, tp=1, pp=1, ep=8, global_batch=512), "ok"),
    ("kimi-k2-h800-2048", cmd("dgx_h800", 2048, "kimi_k2", seq=4096, tp=1, pp=16, ep=32, global_batch=4096), "any"),
    ("qwen3-235b-h100-256", cmd("dgx_h100", 256, "qwen3_235b_a22b", seq=4096, tp=2, pp=8, ep=32, global_batch=512), "ok"),
    ("qwen3-235b-h100-256-fp8", cmd("dgx_h100", 256, "qwen3_235b_a22b", "fp8", seq=4096, tp=2, pp=8, ep=32, global_batch=512), "ok"),
    ("qwen3-235b-h100-256-etp1", cmd("dgx_h100", 256, "qwen3_235b_a22b", seq=4096, tp=2, pp=8, ep=32, etp=1, global_batch=512), "ok"),
    ("dsv3-h100-1024-tp2-etp1", cmd("dgx_h100", 1024, "deepseek_v3", seq=4096, tp=2, pp=16, ep=64, etp=1, global_batch=8192), "any"),
    ("mixtral-8x7b-h100-64-ds", cmd("dgx_h100", 64, "mixtral_8x7b", seq=4096, framework="deepspeed", tp=1, pp=1, ep=8, global_batch=256), "any"),
    ("mixtral-8x7b-h100-64-fsdp", cmd("dgx_h100", 64, "mixtral_8x7b", seq=4096, framework="fsdp", zero=3, ep=8, global_batch=256), "any"),
    ("qwen3-30b-h100-16", cmd("dgx_h100", 16, "qwen3_30b_a3b", seq=4096, tp=1, pp=1, ep=8, global_batch=512), "ok"),
    ("qwen3-30b-h100-16-fsdp", cmd("dgx_h100", 16, "qwen3_30b_a3b", seq=4096, framework="fsdp", zero=3, ep=8, global_batch=256), "any"),
    ("grok1-h100-512", cmd("dgx_h100", 512, "grok1_314b", seq=8192, tp=8, pp=8, ep=8, global_batch=512), "any"),
    # --- odd but legal
    ("odd-l3-8b-pp5", cmd("dgx_h100", 40, "llama3_8b", seq=8192, tp=1, pp=5, global_batch=128), "any"),
    ("odd-l3-70b-pp3", cmd("dgx_h100", 96, "llama3_70b", seq=8192, tp=8, pp=3, global_batch=128), "any"),
    ("odd-gpt3-vocab-tp8", cmd("dgx_a100", 64, "gpt3_175b", seq=2048, tp=8, pp=8, global_batch=64), "ok"),
    ("odd-l3-8b-seq128k-cp16", cmd("dgx_h100", 128, "llama3_8b", seq=131072, tp=8, cp=16, global_batch=8), "ok"),
    ("odd-l3-8b-seq128k-nocp", cmd("dgx_h100", 8, "llama3_8b", seq=131072, tp=1, pp=1, global_batch=8), "any"),
    ("odd-l3-405b-seq128k", cmd("dgx_h100", 16384, "llama3_405b", seq=131072, tp=8, pp=16, cp=16, global_batch=16), "any"),
    ("odd-gbs-not-div", cmd("dgx_h100", 8, "llama3_8b", seq=8192, tp=1, pp=1, global_batch=100), "any"),
    ("odd-l3-70b-vs3", cmd("dgx_h100", 128, "llama3_70b", seq=8192, tp=8, pp=4, virtual_stages=3, global_batch=128), "any"),
    ("odd-mixtral-ep16", cmd("dgx_h100", 64, "mixtral_8x7b", seq=4096, tp=1, pp=1, ep=16, global_batch=256), "any"),
    ("odd-l3-8b-cp2-oddseq", cmd("dgx_h100", 16, "llama3_8b", seq=8191, tp=1, cp=2, global_batch=32), "any"),
    ("odd-l3-70b-tp16", cmd("dgx_h100", 128, "llama3_70b", seq=8192, tp=16, pp=1, global_batch=128), "any"),
    ("odd-l3-405b-a100", cmd("dgx_a100", 2048, "llama3_405b", seq=8192, tp=8, pp=16, global_batch=1024), "ok"),
    ("odd-dsv3-dualpipe", cmd("dgx_h800", 2048, "deepseek_v3", "fp8", seq=4096, tp=1, pp=16, ep=64, global_batch=15360, schedule="dualpipe"), "any"),
    ("odd-l3-70b-auto-vs", cmd("dgx_h100", 512, "llama3_70b", seq=8192, tp=4, pp=4, cp=2, virtual_stages=5, global_batch=512, placement="auto"), "ok"),
    ("odd-l3-70b-vs-only", cmd("dgx_h100", 512, "llama3_70b", seq=8192, virtual_stages=5, global_batch=512), "ok"),
    ("odd-dsv3-dualpipe-auto", cmd("dgx_h800", 2048, "deepseek_v3", "fp8", seq=4096, tp=1, pp=16, ep=64, global_batch=15360, schedule="dualpipe", placement="auto"), "any"),
    ("odd-l3-70b-mbs2", cmd("dgx_h100", 512, "llama3_70b", seq=8192, tp=4, pp=4, cp=2, micro_batch_size=2, global_batch=512), "any"),
    # --- bad inputs a newcomer types
    ("bad-neg-nodes", cmd("dgx_h100", -8, "llama3_8b", tp=1), "err"),
    ("bad-tp0", cmd("dgx_h100", 8, "llama3_8b", tp=0), "err"),
    ("bad-unknown-model", cmd("dgx_h100", 8, "llama4_70b", tp=1), "err"),
    ("bad-misspelled-key", cmd("dgx_h100", 8, "llama3_8b") + ["parallelism.tpp=4"], "err"),
    ("bad-fp4", cmd("dgx_h100", 8, "llama3_8b", "fp4", tp=1), "err"),
    ("bad-seq0", cmd("dgx_h100", 8, "llama3_8b", seq=0, tp=1), "err"),
    ("bad-gbs-lt-dp", cmd("dgx_h100", 64, "llama3_8b", tp=1, pp=1, global_batch=4), "err"),
    ("bad-nodes-not-div", cmd("dgx_h100", 1000, "llama3_70b", tp=8, pp=4), "err"),
    ("bad-unknown-system", cmd("dgx_b200", 8, "llama3_8b", tp=1), "err"),
    ("bad-pp-text", cmd("dgx_h100", 8, "llama3_8b", tp=1, pp="three"), "err"),
    ("bad-framework", cmd("dgx_h100", 8, "llama3_8b", framework="megatronn", tp=1), "err"),
    ("bad-mbs0", cmd("dgx_h100", 8, "llama3_8b", tp=1, micro_batch_size=0), "err"),
    ("bad-heads-tp3", cmd("dgx_h100", 24, "llama3_8b", tp=3, pp=1), "err"),
]

DROP = {"validation_nearest", "validation_record", "validation_class", "collectives"}  # held out (COMMON.md)


def run_one(cid: str, overrides: list[str], expect: str, timeout: float) -> dict:
    rc, out, err, secs = run_cli([sys.executable, "-m", "estimator.cli", "estimate", *overrides, "output=json"], timeout)
    rec: dict = {"id": cid, "args": overrides, "expect": expect, "rc": rc, "secs": secs}
    rec["traceback"] = TRACEBACK in err
    rec["error"] = error_line(rc, err)
    if rc == 0:
        try:
            res = json.loads(out)
        except json.JSONDecodeError:
            res = {}
        res = {k: v for k, v in res.items() if k not in DROP}
        rec.update({k: res.get(k) for k in ("iter_time_s", "mfu", "memory_total_bytes", "device_memory_bytes", "layout",
                                              "framework", "compute_time_s", "bubble_time_s", "exposed_comm_time_s")})
    rec["flags"] = flags(rec)
    return rec


def _bad_number(x: object, positive: bool = True) -> bool:
    if not isinstance(x, (int, float)):
        return True
    return not math.isfinite(x) or (x <= 0 if positive else x < 0)


def flags(rec: dict) -> list[str]:
    out = outcome_flags(rec, 60)
    if rec["rc"] == 0:
        mfu = rec.get("mfu")
        if _bad_number(mfu) or mfu >= 1:
            out.append(f"mfu {mfu}")
        if _bad_number(rec.get("iter_time_s")):
            out.append(f"iter {rec.get('iter_time_s')}")
        for key in ("compute_time_s", "bubble_time_s", "exposed_comm_time_s"):
            if _bad_number(rec.get(key), positive=False):
                out.append(f"{key} {rec.get(key)}")
        mem, cap = rec.get("memory_total_bytes"), rec.get("device_memory_bytes")
        if isinstance(mem, (int, float)) and isinstance(cap, (int, float)) and mem > cap:
            out.append("MEMORY > CAPACITY")
    return out


def _short(overrides: list[str]) -> str:
    keep = []
    for o in overrides:
        if o in (H,):
            continue
        keep.append(o.replace("parallelism.", "").replace("fabric.nodes", "n").replace("model.seq_len", "seq")
                    .replace("global_batch", "gbs").replace("micro_batch_size", "mbs").replace("virtual_stages", "vs")
                    .replace("precision=", "").replace("system=", "").replace("model=", ""))
    return " ".join(keep)


def table(records: list[dict]) -> str:
    rows = ["| id | command | rc | s | tb | result | mfu | mem/cap GB | flags |", "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if r["rc"] == 0:
            res = f"{r.get('iter_time_s') or 0:.3g} s; {r.get('framework')}; {r.get('layout')}"
            mfu = f"{r['mfu']:.3f}" if isinstance(r.get("mfu"), (int, float)) else str(r.get("mfu"))
            mem = r.get("memory_total_bytes") or 0
            cap = r.get("device_memory_bytes") or 0
            memcap = f"{mem / 1e9:.0f}/{cap / 1e9:.0f}"
        else:
            res, mfu, memcap = r["error"].replace("|", "/")[:300], "", ""
        rows.append(f"| {r['id']} | `{_short(r['args'])}` | {r['rc']} | {r['secs']:.1f} | {'Y' if r['traceback'] else ''} "
                    f"| {res} | {mfu} | {memcap} | {', '.join(r['flags'])} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args, wanted = parse_args(__doc__, argv)
    chosen = [c for c in COMMANDS if not wanted or any(w in c[0] for w in wanted)]
    records = []
    for cid, overrides, expect in chosen:
        records.append(run_one(cid, overrides, expect, args.timeout))
        note(records[-1])
    return finish(records, table(records), args.json)


if __name__ == "__main__":
    sys.exit(main())
