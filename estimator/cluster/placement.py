"""Which GPUs a starting job gets.

GPUs are numbered as the fabric numbers its endpoints; a view's ``blocks`` are its nested
locality domains of consecutive GPU ids (a leaf's or node's GPUs, then a pod's; a Lumorph
server's tiles; an OPSquare pod). Policies:

* ``packed`` — consolidate: the best-fitting (fullest that fits) domain of the lowest level that
  holds the job; within it (or across the cluster when nothing holds it) the sub-domains with the
  most free GPUs first, so the job spans as few leaves and pods as possible. A fabric without
  domains (a ring) gets the shortest run of consecutive free GPUs that holds the job.
* ``spread`` — round-robin over the leaves with the most free GPUs (one GPU per leaf per turn).
* ``random`` — uniformly random free GPUs (seeded).
* ``topology`` — ``packed``, but among the domains that fit (and the sub-domains it fills) the
  ones whose uplinks the running jobs load least come first (a contention-aware consolidation).
* ``lumorph`` / ``torus_slices`` / ``bcube_groups`` — the allocation policies of
  :mod:`estimator.allocation` (Lumorph's any-size direct-connect slices, TPU-style 3D-torus
  cuboids, SiPAC/BCube aligned groups), sized from the cluster.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np

from estimator.errors import EstimatorError

POLICIES = ("packed", "spread", "random", "topology", "lumorph", "torus_slices", "bcube_groups")


class Placer(ABC):
    gpus: int

    @abstractmethod
    def allocation(self, n: int) -> int:
        """GPUs a job asking ``n`` occupies (a policy with fixed shapes rounds up)."""

    @abstractmethod
    def place(self, n: int) -> np.ndarray | None:
        """Take GPUs for a job of ``n`` (sorted ids, ``allocation(n)`` of them), or None if it cannot now."""

    @abstractmethod
    def release(self, gpus: np.ndarray) -> None: ...

    @abstractmethod
    def free_count(self) -> int: ...


class BlockPlacer(Placer):
    """``packed`` / ``spread`` / ``random`` / ``topology`` over a free mask and nested blocks."""

    def __init__(self, gpus: int, blocks: tuple[int, ...], policy: str, seed: int = 0,
                 block_load: Callable[[int, np.ndarray], np.ndarray] | None = None):
        self.gpus, self.policy = gpus, policy
        self.blocks = tuple(b for b in blocks if 1 < b < gpus)
        self.free = np.ones(gpus, dtype=bool)
        self._free_count = gpus
        self.rng = np.random.default_rng(seed)
        self.block_load = block_load  # (level, block ids) -> load of each block's uplinks (topology)

    def allocation(self, n: int) -> int:
        return n

    def free_count(self) -> int:
        return self._free_count

    def release(self, gpus: np.ndarray) -> None:
        self.free[gpus] = True
        self._free_count += len(gpus)

    def _take(self, ids: np.ndarray) -> np.ndarray:
        ids = np.sort(ids)
        self.free[ids] = False
        self._free_count -= len(ids)
        return ids

    def place(self, n: int) -> np.ndarray | None:
        if n > self._free_count:
            return None
        if self.policy == "random":
            return self._take(self.rng.choice(np.flatnonzero(self.free), n, replace=False))
        if self.policy == "spread":
            return self._take(self._spread(n))
        return self._take(self._packed(n))

    # ---- policies -------------------------------------------------------------------------------
    def _counts(self, size: int, lo: int = 0, hi: int | None = None) -> np.ndarray:
        hi = self.gpus if hi is None else hi
        return np.add.reduceat(self.free[lo:hi].astype(np.int64), np.arange(0, hi - lo, size))

    def _order(self, level: int, blocks: np.ndarray, counts: np.ndarray, best_fit: bool) -> np.ndarray:
        """Positions in ``blocks`` (block ids of ``level``, their free ``counts``) in the order to
        use them: the fullest that fits first (``best_fit``) or the most free first; ``topology``
        puts the least loaded uplinks first."""
        keys = [blocks, counts if best_fit else -counts]
        if self.policy == "topology" and self.block_load is not None:
            keys.append(self.block_load(level, blocks))
        return np.lexsort(keys)

    def _packed(self, n: int) -> np.ndarray:
        if not self.blocks:  # no hierarchy (a ring, circuits): the best-fitting run of consecutive free GPUs
            return self._run(n)
        for level, size in enumerate(self.blocks):
            if n > size:
                continue
            counts = self._counts(size)
            fits = np.flatnonzero(counts >= n)
            if len(fits):
                block = int(fits[self._order(level, fits, counts[fits], True)[0]])
                return self._fill(block * size, min(self.gpus, (block + 1) * size), n, level - 1)
        return self._fill(0, self.gpus, n, len(self.blocks) - 1)

    def _fill(self, lo: int, hi: int, n: int, level: int) -> np.ndarray:
        """``n`` free GPUs of [lo, hi): whole sub-blocks of ``level`` with the most free first."""
        if level < 0:
            return lo + np.flatnonzero(self.free[lo:hi])[:n]
        size = self.blocks[level]
        counts = self._counts(size, lo, hi)
        taken: list[np.ndarray] = []
        need = n
        for b in self._order(level, lo // size + np.arange(len(counts)), counts, False).tolist():
            if need == 0:
                break
            if counts[b] == 0:
                continue
            got = self._fill(lo + b * size, min(hi, lo + (b + 1) * size), min(need, int(counts[b])), level - 1)
            taken.append(got)
            need -= len(got)
        return np.concatenate(taken) if taken else np.zeros(0, dtype=np.int64)

    def _run(self, n: int) -> np.ndarray:
        """The shortest run of consecutive free GPUs holding ``n`` (lowest first); the lowest free
        GPUs when no run does."""
        edges = np.diff(np.concatenate(([0], self.free.astype(np.int8), [0])))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        fits = np.flatnonzero(ends - starts >= n)
        if len(fits):
            best = fits[np.argmin(ends[fits] - starts[fits])]
            return np.arange(starts[best], starts[best] + n)
        return np.flatnonzero(self.free)[:n]

    def _spread(self, n: int) -> np.ndarray:
        ids = np.flatnonzero(self.free)
        if not self.blocks:
            return ids[np.linspace(0, len(ids) - 1, n).round().astype(np.int64)] if n > 1 else ids[:1]
        leaf = ids // self.blocks[0]
        counts = np.bincount(leaf, minlength=-(-self.gpus // self.blocks[0]))
        first = np.searchsorted(leaf, leaf)  # index of each leaf's first free GPU in ids
        turn = np.arange(len(ids)) - first  # the how-many-th free GPU of its leaf
        order = np.lexsort((leaf, -counts[leaf], turn))
        return ids[order[:n]]


class AllocationPlacer(Placer):
    """One of :mod:`estimator.allocation`'s rack policies."""

    def __init__(self, name: str, gpus: int, tiles: int, r: int):
        from estimator.allocation import make_policy

        self.gpus = gpus
        self.policy = make_policy(name, gpus, tiles=tiles, r=r)

    def allocation(self, n: int) -> int:
        size = self.policy.allocation_size(n)
        if size is None:
            raise EstimatorError(f"placement {self.policy.name}: no shape holds a job of {n} GPUs on {self.gpus}")
        return size

    def place(self, n: int) -> np.ndarray | None:
        got = self.policy.place(n)
        return None if got is None else np.sort(np.asarray(got, dtype=np.int64))

    def release(self, gpus: np.ndarray) -> None:
        self.policy.release(tuple(int(g) for g in gpus))

    def free_count(self) -> int:
        return self.policy.free_count()


def _int_field(config: object, name: str) -> int:
    """``config.<name>`` if it is an integer field (0 otherwise: absent, a method, a flag)."""
    value = getattr(config, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def make_placer(policy: str, gpus: int, blocks: tuple[int, ...], seed: int, fabric_config: object,
                block_load: Callable[[int, np.ndarray], np.ndarray] | None = None) -> Placer:
    if policy in ("packed", "spread", "random", "topology"):
        return BlockPlacer(gpus, blocks, policy, seed, block_load)
    if policy in ("lumorph", "torus_slices", "bcube_groups"):
        # only integer fields count: a fat tree's config has a ``radix()`` method (its switch ports),
        # which is not a BCube radix (it used to reach int() and end in a TypeError traceback)
        tiles = _int_field(fabric_config, "tiles_per_server") or 32
        r = _int_field(fabric_config, "r") or _int_field(fabric_config, "radix") or 2
        return AllocationPlacer(policy, gpus, tiles, r)
    from estimator.config_checks import did_you_mean

    raise EstimatorError(f"cluster.placement must be one of {', '.join(POLICIES)}, got {policy!r}"
                         f"{did_you_mean(policy, POLICIES)}")
