"""Hypothesis fuzzing of every input format (TopoOpt, FlexFlow, Kineto, Horovod, Chakra, canonical
workload JSON, topology YAML) with the mutation classes of :mod:`fuzz_inputs`: truncation, bit
flips, splices, NaN/Infinity, huge integers, deep nesting and UTF-16/32. Every mutant must load
into a valid, serialisable result or fail with one short EstimatorError line — never another
exception. Example counts are bounded so CI stays fast (``benchmarks/fuzz_inputs.py`` runs more).
"""

from __future__ import annotations

import random

import pytest
from fuzz_inputs import CLASSES, check_one, mutate, seeds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FORMATS = ("topoopt", "flexflow", "kineto", "horovod", "chakra", "workload", "topology")


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_mutant_loads_or_fails_in_one_line(fmt, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"fuzz_{fmt}")
    pool = seeds()[fmt]
    others = [b for f in seeds().values() for b, _ in f]

    @settings(max_examples=70, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(cls=st.sampled_from(CLASSES), seed=st.integers(0, 2**32 - 1), which=st.integers(0, 10))
    def run(cls, seed, which):
        data, suffix = pool[which % len(pool)]
        blob = mutate(data, others[which % len(others)], cls, random.Random(seed))
        problem = check_one(fmt, blob, suffix, folder)
        assert problem is None, f"{fmt}/{cls} (seed {seed}): {problem}"

    run()


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_class_against_each_format(fmt, tmp_path):
    """Every mutation class at least a few times per format (hypothesis may skew the mix)."""
    pool = seeds()[fmt]
    for cls in CLASSES:
        for k in range(4):
            rng = random.Random(hash((fmt, cls, k)) & 0xFFFF)
            data, suffix = pool[k % len(pool)]
            blob = mutate(data, pool[0][0], cls, rng)
            problem = check_one(fmt, blob, suffix, tmp_path)
            assert problem is None, f"{fmt}/{cls} #{k}: {problem}"
