"""Communication-step counts of all-gather schemes on an N-node bidirectional WDM ring.

Source: seed 002 (OpTree, Dai et al.), Sec. III-B..D and Table I. Model assumptions, as in the
paper: every wavelength carries the same amount ``d`` (one node's item) per step, so a scheme's
time is ``steps * (d / B + a)`` (Eq. 3); a step is one time slot of the ring's ``w`` wavelengths.

* Ring: ``N - 1`` steps; Neighbour Exchange (NE): ``N / 2`` steps (items of ``2d`` after step 1).
* One-stage all-to-all routing needs ``ceil(N^2/8)`` wavelengths on a ring (Lemma 1), so
  ``ceil(N^2 / (8 w))`` steps. Note: Table I prints 128 for N = 1024, w = 64; the formula gives
  2048. We implement the formula (128 = N^2/(8w) would need w = 1024) and report both.
* OpTree with ``k >= 2`` stages: ``S(k) = ceil((2k - 1) N^(1 + 1/k) / (8 w))`` (Theorem 1);
  ``k = 1`` is the one-stage model. The closed-form optimum is
  ``k* = [(ln N + sqrt(ln N (ln N - 2))) / 2]`` (Theorem 2), where the paper's text calls the
  bracket "the integer rounding operation" while the extracted formula prints a ceiling:
  ``rounding="round"`` (the words; Fig. 4's optimum depth 7 at 2048 nodes) or ``"ceil"`` (Table I's
  k* = 7 at 1024 nodes, where rounding gives 6 with the same 70 steps). :func:`optree_best_depth` is
  the brute-force search over integer k it is checked against.
* WRHT (ref. [6] of seed 002): the seed text does not define the group size ``p``. The text gives
  two step counts, ``1 + ceil((N - p)/(p - 1)) + (theta - 1) p^(theta - 1)`` (variant 1) and
  ``... + theta p^(theta - 1)`` (variant 2), ``theta = ceil(log_p N)``; Table I prints a third,
  ``ceil((N - p)/(p - 1)) + ceil((theta - 1) N / p) + 1``, which gives 259 for no p (264 at p = 12,
  244 at p = 13). Variant 1 gives Table I's 259 (N = 1024, w = 64) only at ``p = 4w - 2`` = 254 (one
  node collects from 2w - 1 neighbours on each direction of the two fibre pairs), variant 2 only at
  ``p = 2w - 3`` = 125. Both are fits to that one number; variant 1 is the default, ``p`` and the
  variant can be overridden.
"""

from __future__ import annotations

import math
from functools import lru_cache

from estimator.errors import EstimatorError


def _check(n: int, w: int) -> None:
    if n < 2:
        raise EstimatorError(f"WDM ring: need at least 2 nodes, got {n}")
    if w < 1:
        raise EstimatorError(f"WDM ring: fabric.wavelengths must be >= 1, got {w}")


def ring_steps(n: int) -> int:
    return n - 1


def neighbour_exchange_steps(n: int) -> int:
    """NE pairs neighbours; ``ceil(N/2)`` steps (the paper's N/2 for even N)."""
    return math.ceil(n / 2)


def one_stage_wavelengths(n: int) -> int:
    """Lemma 1 (ring): minimum wavelengths for one-stage all-to-all routing."""
    return math.ceil(n * n / 8)


def one_stage_steps(n: int, w: int) -> int:
    _check(n, w)
    return math.ceil(n * n / (8 * w))


def optree_steps(n: int, w: int, k: int) -> int:
    """Theorem 1: steps of a k-stage OpTree (k = 1: the one-stage model)."""
    _check(n, w)
    if k < 1:
        raise EstimatorError(f"OpTree depth k must be >= 1, got {k}")
    if k == 1:
        return one_stage_steps(n, w)
    # small epsilon keeps exact integers (e.g. N = m^k) from rounding up through float error
    return math.ceil((2 * k - 1) * n ** (1 + 1 / k) / (8 * w) - 1e-9)


ROUNDINGS = ("round", "ceil")


def optree_k_star_real(n: int) -> float:
    """Theorem 2's continuous optimum ``(ln N + sqrt(ln N (ln N - 2))) / 2`` (1 when N <= e^2)."""
    ln = math.log(n)
    if ln <= 2:
        return 1.0
    return (ln + math.sqrt(ln * (ln - 2))) / 2


def optree_k_star(n: int, rounding: str = "round") -> int:
    """Theorem 2: the closed-form optimal depth, rounded to the nearest integer (``"round"``, the
    paper's words) or up (``"ceil"``, the printed bracket); see the module docstring."""
    if rounding not in ROUNDINGS:
        raise EstimatorError(f"OpTree k* rounding must be one of {', '.join(ROUNDINGS)}, got {rounding!r}")
    k = optree_k_star_real(n)
    return max(1, math.ceil(k) if rounding == "ceil" else math.floor(k + 0.5))


@lru_cache(maxsize=4096)
def optree_best_depth(n: int, w: int) -> tuple[int, int]:
    """Brute force over every integer depth 1..ceil(log2 N): ``(k, steps)`` with the fewest
    steps (the smallest such k on ties)."""
    _check(n, w)
    kmax = max(1, math.ceil(math.log2(n)))
    best = min(range(1, kmax + 1), key=lambda k: (optree_steps(n, w, k), k))
    return best, optree_steps(n, w, best)


WRHT_VARIANTS = (1, 2)


def wrht_group_default(w: int, variant: int = 1) -> int:
    """The group size each text variant needs to give Table I's 259 steps (N = 1024, w = 64)."""
    return 4 * w - 2 if variant == 1 else 2 * w - 3


def wrht_steps(n: int, w: int, p: int | None = None, variant: int = 1) -> int:
    """WRHT all-gather steps, text variant 1 or 2 (see module docstring for the choice of ``p``)."""
    _check(n, w)
    if variant not in WRHT_VARIANTS:
        raise EstimatorError(f"WRHT variant must be 1 or 2, got {variant!r}")
    p = wrht_group_default(w, variant) if p is None else p
    if p < 2:
        raise EstimatorError(f"WRHT group size must be >= 2, got {p}")
    if p >= n:  # one group: gather in one step, broadcast back in one step
        return 2
    theta = math.ceil(math.log(n, p) - 1e-12)
    return 1 + math.ceil((n - p) / (p - 1)) + (theta - (1 if variant == 1 else 0)) * p ** (theta - 1)


def wrht_table_formula(n: int, p: int) -> int:
    """Table I's printed WRHT formula ``ceil((N - p)/(p - 1)) + ceil((theta - 1) N / p) + 1``."""
    theta = math.ceil(math.log(n, p) - 1e-12)
    return math.ceil((n - p) / (p - 1)) + math.ceil((theta - 1) * n / p) + 1


def allgather_steps(scheme: str, n: int, w: int, k: int | None = None, rounding: str = "round") -> int:
    """Steps of a named scheme: ring, ne, wrht, one_stage, optree (k=None: k* with ``rounding``)."""
    if scheme == "ring":
        return ring_steps(n)
    if scheme == "ne":
        return neighbour_exchange_steps(n)
    if scheme == "wrht":
        return wrht_steps(n, w)
    if scheme == "one_stage":
        return one_stage_steps(n, w)
    if scheme == "optree":
        return optree_steps(n, w, optree_k_star(n, rounding) if k is None else k)
    raise EstimatorError(f"unknown WDM-ring all-gather scheme {scheme!r}")
