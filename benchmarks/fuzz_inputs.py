"""Fuzz every input format with every mutation class and print tried / failures per format.

    python benchmarks/fuzz_inputs.py [--per-class 40] [--seed 0]

Uses the mutation classes and loaders of ``tests/fuzz_inputs.py`` (truncation, bit flips, splices,
NaN/Infinity, huge integers, deep nesting, UTF-16/32). A failure is any outcome other than a
valid, serialisable load or a one-line EstimatorError; the first few are printed.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz_inputs import CLASSES, check_one, mutate, seeds  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pool = seeds()
    others = [b for f in pool.values() for b, _ in f]
    print(f"{'format':<10} {'tried':>6} {'failures':>9} {'wall_s':>7}")
    total_fail = 0
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, items in pool.items():
            t0, tried, failures = time.perf_counter(), 0, []
            for cls in CLASSES:
                for k in range(args.per_class):
                    data, suffix = items[k % len(items)]
                    blob = mutate(data, rng.choice(others), cls, random.Random(rng.getrandbits(32)))
                    problem = check_one(fmt, blob, suffix, Path(tmp))
                    tried += 1
                    if problem:
                        failures.append(f"{cls}: {problem}")
            total_fail += len(failures)
            print(f"{fmt:<10} {tried:>6} {len(failures):>9} {time.perf_counter() - t0:>7.1f}")
            for f in failures[:3]:
                print(f"    {f}")
    sys.exit(1 if total_fail else 0)


if __name__ == "__main__":
    main()
