"""The llm independent rows of an `estimator validate output=json` run, by the software stack that ran them.

    estimator validate output=json > now.json
    python scripts/by_stack.py now.json [before.json]     # markdown table (validation/README.md, "by the stack")

A row's stack is read from its id prefix and hardware column (STACKS, first match wins); every independent llm row
must fall into one stack (an unmatched row is an error, so a new family of rows gets its own line).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# (label, id regex, hardware substring or None); first match wins
STACKS: list[tuple[str, str, str | None]] = [
    ("Megatron-core MoE on H100: Grok-1 314B (dgxc-benchmarking)", r"grok1", None),
    ("Megatron-core MoE on H100: Qwen3-30B-A3B dispatcher / EP-overlap A/B runs and verification card",
     r"^mbridge26(0518|0725|0719)-qwen3", None),
    ("Megatron-core MoE on H100: Qwen3-30B-A3B, Megatron-Bridge performance tables and recipe",
     r"^mbridge(2\d{3,5}|moeopt)-qwen3-30b", None),
    ("Megatron-core MoE on H100: Qwen3-235B-A22B (Megatron-Bridge)", r"^mbridge\d+-qwen3-235b", None),
    ("Megatron-core MoE on H100: Mixtral 8x7B (Megatron-LM MoE README)", r"mixtral", None),
    ("DeepSeek-V3 on H100, Megatron-core MoE with MLA (NeMo / Megatron-Bridge)", r"^(dgxc|mbridge)\d+-deepseek-v3", None),
    ("NeMo AutoModel MoE on H100, FSDP2 + DeepEP (DeepSeek-V3, Kimi K2, Qwen3-30B-A3B)",
     r"^automodel(2510)?-(deepseek|kimi|qwen3)", None),
    ("DeepSeek-V3 report's own run: 2,048 H800, DualPipe", r"^deepseek24-v3", None),
    ("Megatron-LM / NeMo on Cisco systems (MLPerf v5.1 / v6.0)", r"^mlperf", "Cisco"),
    ("Megatron-LM on A100 (SC21, PTD-P; README tables of Sept 2020 and Jan 2021)",
     r"^(megatron-sc21|megatron-gpt3|narayanan21-t2-ptdp|mlm2009|mlm2101)", None),
    ("A100 runs outside NVIDIA's tables: FlashAttention GPT-3 table, InternLM-7B, TinyLlama", r"^(fa2211|internlm|tinyllama)", None),
    ("Megatron-LM baseline of MegaScale on A100, RoCE", r"^megascale", None),
    ("DeepSpeed 2021 pipeline (MT-NLG)", r"^mtnlg", None),
    ("DeepSpeed 2021 ZeRO-3 (Narayanan et al. Table 2)", r"^narayanan21-t2-zero3", None),
    ("Megatron-DeepSpeed on Jean Zay (BLOOM-176B, BigScience fp16 trials)", r"^(bloom|bigsci)", None),
    ("FSDP family: torchtitan and Trainy", r"^(titan|trainy)", None),
    ("FSDP family: MosaicML MPT on the Triton kernel", r"^mpt(0723)?-", None),
    ("FSDP family: IBM fms-fsdp Llama 34B / 70B", r"^fms", None),
    ("FSDP family: MosaicML MPT on FlashAttention-1, A100, Dec 2022 / Feb 2023 README lines", r"^mpt(2212|2302)-", None),
    ("FSDP family: MosaicML MPT on FlashAttention-1, A100, Dec 2022 FULL_TABLES lines", r"^mpt2212f-", None),
    ("FSDP family: torchao float8 benchmark (torchtitan)", r"^torchao", None),
    ("FSDP family: NeMo AutoModel Llama 3.1 70B CP 2", r"^automodel2604-llama", None),
    ("FSDP family: OLMo-core", r"^olmocore", None),
    ("FSDP family: Meta's Llama 3 405B runs", r"^llama3-", None),
    ("DeepSpeed 0.6 pipeline, GLM-130B on 768 A100 40GB", r"^glm", None),
    ("FairScale FSDP + Megatron TP, OPT-175B on 992 A100 (metaseq)", r"^opt", None),
    ("BAAI FlagPerf (blind round h99): Megatron-core 0.6 / FlagScale Llama on H100, H800, A800",
     r"^flagperf-llama(3|2-70b)", None),
    ("BAAI FlagPerf (blind round h99): DeepSpeed ZeRO-3 + HF Llama 2 7B on H800, A800", r"^flagperf-llama2-7b-ds", None),
    ("Megatron-LM / NeMo / Megatron-Bridge on H100 / H200, InfiniBand, dense",
     r"^(dgxc|mbridge|nemo|nfl|mlperf|mlm08|nemotron4)", None),
]


def stack(row: dict) -> str:
    for label, pattern, hardware in STACKS:
        if re.search(pattern, row["id"]) and (hardware is None or hardware in (row.get("hardware") or "")):
            return label
    raise SystemExit(f"{row['id']}: no stack in scripts/by_stack.py matches this row; add one")


def buckets(path: str) -> dict[str, list[float]]:
    rows = json.loads(Path(path).read_text())["rows"]
    out: dict[str, list[float]] = {label: [] for label, _p, _h in STACKS}
    for row in rows:
        if row["kind"] == "llm" and row["role"] == "independent" and row.get("error_pct") is not None:
            out[stack(row)].append(abs(row["error_pct"]))
    out["all"] = [e for label, errs in out.items() for e in errs]
    return out


def mean_max(errs: list[float]) -> tuple[float, float]:
    return sum(errs) / len(errs), max(errs)


def main(argv: list[str]) -> None:
    if len(argv) not in (2, 3):
        raise SystemExit("usage: python scripts/by_stack.py NOW.json [BEFORE.json]")
    now = buckets(argv[1])
    before = buckets(argv[2]) if len(argv) == 3 else None
    print("| stack | rows | mean \\|error\\| | max \\|error\\| |" + (" before |" if before else ""))
    print("|---|---:|---:|---:|" + ("---|" if before else ""))
    for label, errs in now.items():
        if not errs:
            continue
        mean, worst = mean_max(errs)
        line = f"| {label} | {len(errs)} | {mean:.1f} % | {worst:.1f} % |"
        if before is not None:
            old = before[label]
            line += " {} rows {:.1f} / {:.1f} % |".format(len(old), *mean_max(old)) if old else " - |"
        print(line)


if __name__ == "__main__":
    main(sys.argv)
