"""How far to trust a large-model estimate: its class of run and the model's record on that class.

A hybrid (LLM) estimate belongs to one *class*: the training stack that runs it (``framework.name``),
whether its sequence is longer than :data:`LONG_CONTEXT` tokens, for PyTorch FSDP whether it
checkpoints activations, and whether the model is a mixture of experts (``/moe``). These are the
things the validation found the model's error to depend on (docs/large-models.md, "How far to trust
an estimate"); FSDP rows without checkpointing and long-context FSDP rows are optimistic, and MoE
rows err both ways (validation/llm_rows.md, "Round h36"). Each class's record ends with issue #23's verdict on it
(:func:`class_summary`), the rule ``estimator validate`` and the report apply too.

``estimator validate pin=true`` writes ``validation/record.csv`` (:data:`RECORD_FILE`): every LLM
row's class, group and signed error. ``estimator estimate`` then prints, beside a hybrid estimate,
the independent rows of its class: how many, mean |error| and the signed range, or that no published
run of the class was checked; and the three independent runs nearest to it (:func:`nearest`: model size,
GPU count, sequence length, class, device and precision) with their signed errors, the record closest to
the user's own case. The record is the validation's own output, never typed in by hand;
tests/test_validation_suite.py fails when it drifts from the model by more than
:data:`RECORD_DRIFT_PCT` points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError
from estimator.files import REPO_ROOT
from estimator.validation.rows import RECORD_FILE, number, read_written, write_written

HEADER = ("id", "class", "role", "error_pct", "params_b", "gpus", "seq_len", "device", "precision")
#: runs listed as the nearest to an estimate (``validation_nearest``)
NEAREST = 3
#: where long context starts: chosen at the fifth stop, when NeMo's long-sequence table (then priced with cuDNN
#: attention) was +15 % at 16k and +31 % at 32k tokens; with the runs' flash-attn 2 it is within +-6 %, and torchtitan's
#: context-parallel rows (32k-256k) still are +9 .. +53 % (validation/llm_rows.md)
LONG_CONTEXT = 16384
#: how far (percentage points) a recorded error may drift from the current model before the test asks for a re-pin
RECORD_DRIFT_PCT = 1.0
#: issue #23's acceptance rule for independent large-model rows, applied to a class of run: it holds when the mean
#: |error| is at most ACCEPT_MEAN_PCT and the max at most ACCEPT_MAX_PCT; fewer than ACCEPT_MIN_ROWS rows get no verdict
ACCEPT_MEAN_PCT, ACCEPT_MAX_PCT, ACCEPT_MIN_ROWS = 10.0, 20.0, 3

STACKS = {"megatron": "Megatron-LM / NeMo", "fsdp": "PyTorch FSDP", "deepspeed": "DeepSpeed",
          "deepspeed_2021": "DeepSpeed (2021 engine)", "internlm": "InternLM (HybridZeroOptimizer, 2023)"}


def run_class(cfg: dict[str, Any]) -> str | None:
    """The class of a composed config (module docstring), e.g. ``megatron/le16k`` or
    ``fsdp/le16k/no-ac``; None for what is not a hybrid (LLM) estimate."""
    par = cfg.get("parallelism") or {}
    if par.get("strategy") != "hybrid":
        return None
    framework = str((cfg.get("framework") or {}).get("name") or "megatron")
    seq = int((cfg.get("model") or {}).get("seq_len") or 0)
    parts = [framework, "gt16k" if seq > LONG_CONTEXT else "le16k"]
    if framework == "fsdp" and seq <= LONG_CONTEXT:
        parts.append("ac" if str(par.get("recompute") or "none") != "none" else "no-ac")
    if framework.startswith("deepspeed") and int(par.get("zero") or 0) == 3:
        parts.append("zero3")
    if int((cfg.get("model") or {}).get("num_experts") or 0) > 0:
        parts.append("moe")
    return "/".join(parts)


def class_summary(errors: list[float]) -> dict[str, Any]:
    """A class's independent errors (signed, %, at least one): count, mean and max |error|, signed range
    and issue #23's verdict (holds / fails / too few rows)."""
    mean, worst = sum(abs(x) for x in errors) / len(errors), max(abs(x) for x in errors)
    ok = mean <= ACCEPT_MEAN_PCT and worst <= ACCEPT_MAX_PCT
    return {"count": len(errors), "mean_abs_error_pct": mean, "max_abs_error_pct": worst,
            "lowest_error_pct": min(errors), "highest_error_pct": max(errors),
            "verdict": "too few rows" if len(errors) < ACCEPT_MIN_ROWS else "holds" if ok else "fails"}


def verdict(errors: list[float]) -> str:
    """Issue #23's rule on a class's independent errors (signed, %): holds / fails / too few rows."""
    return class_summary(errors)["verdict"] if errors else "too few rows"


def describe(cls: str) -> str:
    """``fsdp/le16k/no-ac`` -> ``PyTorch FSDP, up to 16k tokens, no activation checkpointing``."""
    framework, length, *rest = cls.split("/")
    words = [STACKS.get(framework, framework), "up to 16k tokens" if length == "le16k" else "over 16k tokens"]
    words += [{"ac": "activation checkpointing", "no-ac": "no activation checkpointing",
               "zero3": "ZeRO-3", "moe": "mixture of experts"}.get(r, r) for r in rest]
    return ", ".join(words)


@dataclass(frozen=True)
class Entry:
    id: str
    cls: str
    role: str
    error_pct: float
    params_b: float  # the run's model, billions of parameters
    gpus: int
    seq_len: int
    device: str  # device preset name (a100, h100, h100_gt, h200, ...)
    precision: str


def write_record(path: str | Path, entries: list[Entry]) -> Path:
    return write_written(path, HEADER, [[e.id, e.cls, e.role, f"{e.error_pct:+.1f}", f"{e.params_b:.3g}", str(e.gpus),
                                         str(e.seq_len), e.device, e.precision]
                                        for e in sorted(entries, key=lambda e: e.id)])


def read_record(path: str | Path) -> list[Entry]:
    """The record's entries (empty when the file does not exist); a malformed line is one error."""
    out = []
    for lineno, (ident, cls, role, *values) in read_written(path, HEADER, "validation record"):
        numbers = [number(v) for v in values[:4]]
        for column, text, value in zip(HEADER[3:7], values, numbers, strict=False):
            if not math.isfinite(value) or (column != "error_pct" and value <= 0):
                raise EstimatorError(f"{Path(path).name}:{lineno}: column {column}: {text!r} is not a valid number")
        error, params, gpus, seq = numbers
        out.append(Entry(ident, cls, role, error, params, int(gpus), int(seq), values[4], values[5]))
    return out


@lru_cache(maxsize=8)
def _cached(path: str, mtime_ns: int) -> tuple[Entry, ...]:
    return tuple(read_record(path))


def trust(cfg: dict[str, Any], folder: str | Path = REPO_ROOT / "validation") -> dict[str, Any]:
    """``validation_class`` and ``validation_record`` for a hybrid estimate (empty for others): the
    independent rows of its class in ``folder``'s record (this checkout's by default: the record
    belongs to the model it was measured on), or that none was checked."""
    cls = run_class(cfg)
    if cls is None:
        return {}
    path = Path(folder) / RECORD_FILE
    if not path.exists():
        return {"validation_class": describe(cls), "validation_record": f"no validation record ({path} not found)"}
    entries = _cached(str(path), path.stat().st_mtime_ns)
    errors = [e.error_pct for e in entries if e.cls == cls and e.role == "independent"]
    near = nearest(cfg, cls, entries)
    if not errors:
        text = "no published run of this class has been checked: the estimate is unvalidated"
    else:
        c = class_summary(errors)
        text = (f"{c['count']} independent published runs: mean |error| {c['mean_abs_error_pct']:.1f} %, range "
                f"{c['lowest_error_pct']:+.1f} .. {c['highest_error_pct']:+.1f} % (+ = the model was optimistic); "
                f"issue #23's rule (mean <= {ACCEPT_MEAN_PCT:g} %, max <= {ACCEPT_MAX_PCT:g} %): {c['verdict']}")
    return {"validation_class": describe(cls), "validation_record": text,
            "validation_nearest": "; ".join(f"{e.id} {e.error_pct:+.1f} %" for e in near) or "none"}


def entry_of(cfg: dict[str, Any], ident: str, cls: str, role: str, error_pct: float) -> Entry:
    """A record entry for the run a composed config describes: what :func:`nearest` compares comes from the
    config itself (model size, GPUs, sequence, device, precision)."""
    from estimator.parallel.spec import TransformerSpec

    model = cfg.get("model") or {}
    return Entry(ident, cls, role, error_pct, TransformerSpec.from_cfg(model).params() / 1e9,
                 int((cfg.get("fabric") or {}).get("nodes") or 1), int(model.get("seq_len") or 1),
                 str((cfg.get("device") or {}).get("name") or ""), str(cfg.get("precision") or ""))


def _family(device: str) -> str:
    return device.split("_")[0]  # h100_gt is an H100


def distance(a: Entry, b: Entry) -> float:
    """How unlike two runs are: log-ratios of model size (weight 1), GPU count and sequence length (1/2
    each), plus 1 for another class of run, 1/2 for another GPU generation, 1/4 for another precision."""
    return (abs(math.log(a.params_b / b.params_b)) + 0.5 * abs(math.log(a.gpus / b.gpus))
            + 0.5 * abs(math.log(a.seq_len / b.seq_len)) + (a.cls != b.cls) + 0.5 * (_family(a.device) != _family(b.device))
            + 0.25 * (a.precision != b.precision))


def nearest(cfg: dict[str, Any], cls: str, entries: tuple[Entry, ...] | list[Entry], k: int = NEAREST) -> list[Entry]:
    """The ``k`` independent runs of the record nearest (:func:`distance`) to the estimate ``cfg``."""
    me = entry_of(cfg, "", cls, "", 0.0)
    pool = [e for e in entries if e.role == "independent"]
    return sorted(pool, key=lambda e: (distance(me, e), e.id))[:k]
