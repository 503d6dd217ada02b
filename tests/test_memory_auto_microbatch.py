"""The memory model against Composer's automatic microbatching (llm-foundry's throughput tables).

Composer's ``device_train_microbatch_size: auto`` starts at the per-device batch and halves it on every CUDA
out-of-memory error, so a micro batch its table records is one that fitted, and twice it (when the per-device batch
allows it) is one that did not. The rows say so in their ``measured_what`` ("Composer's automatic microbatching picked
the micro batch"). No throughput is read here: only the memory verdict of the stated layout.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib

from estimator.parallel.estimate import setup_hybrid
from estimator.parallel.memory import memory
from estimator.validation.rows import load_rows

predict = importlib.import_module("estimator.validation.predict")


def verdicts() -> dict[str, tuple[bool, bool]]:
    """Row id -> (the recorded micro batch fits, twice it is refused or beyond the per-device batch)."""
    out = {}
    for row in load_rows("validation"):
        if row.kind != "llm" or "automatic microbatching" not in row.raw.get("measured_what", ""):
            continue
        s = setup_hybrid(copy.deepcopy(predict.composed_config(row)))
        spec, precision, layout, capacity, fw = s.spec, s.precision, s.layout, s.capacity, s.framework
        per_device = layout.microbatches * layout.micro_batch_size
        twice = 2 * layout.micro_batch_size
        fits = _total(spec, layout, fw, precision, layout.micro_batch_size) <= capacity
        out[row.id] = (fits, twice > per_device or _total(spec, layout, fw, precision, twice) > capacity)
    return out


def _total(spec, layout, fw, precision: str, mb: int) -> float:
    """Bytes per GPU of ``layout`` at micro batch ``mb`` (the same per-device batch)."""
    per_device = layout.microbatches * layout.micro_batch_size
    lay = dataclasses.replace(layout, micro_batch_size=mb, microbatches=per_device // mb)
    return memory(spec, lay, fw.grad_bytes(precision), fw, precision == "fp8")["total"]


def test_recorded_micro_batches_fit_and_most_doubled_ones_do_not():
    v = verdicts()
    assert len(v) == 38
    assert all(fits for fits, _ in v.values())  # a run that happened is never refused
    # 25 of 38 against the usable capacity (conf/device/*.yaml: 84.33 GB on H100, 84.01 on A100 80GB, 41.41 on A100
    # 40GB; 26 of 38 against the datasheet's 80 / 40 GB before h83, docs/research/h83-capacity.md); (with or without
    # the recomputed layer and FSDP's unit gradient counted; 15 without the loss backward's gradients at 80 GB); the
    # rest (3B-30B Composer FSDP1 rows) still fit at twice the micro batch: FSDP1's root unit kept gathered and
    # allocator fragmentation are not modelled (docs/research/h81-fsdp-transient.md)
    assert sum(over for _, over in v.values()) >= 25
