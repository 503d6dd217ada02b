"""Allocation policies: who gets which GPUs of a rack.

Every policy answers :meth:`Policy.place` (a set of GPU ids, or ``None`` when it cannot place the
request right now) and :meth:`Policy.release`. Assumptions, per policy:

* :class:`LumorphPolicy` (seed 000, Sec. 3): ``servers`` Lightpath servers of ``tiles`` GPUs
  (<= 32 tiles per wafer). Any number of free GPUs can be given to a tenant as a direct-connect
  topology; circuits inside a server go through MZIs/waveguides, across servers through fibres.
  We assume, as the paper does ("given enough fibers between servers"), that fibres never run out.
  GPUs are taken best-fit: one server if one has room (the fullest that fits), otherwise the
  servers with the most free tiles first, to keep tenants on few servers.
* :class:`TorusSlicePolicy` (TPU-style 3D torus, seed 000 ref. [1]): the rack is an X x Y x Z grid;
  a tenant gets an axis-aligned cuboid slice whose sides are powers of two (TPU v4 slice shapes),
  the smallest such volume >= the request (any orientation), placed at offsets aligned to its side
  lengths. Extra GPUs in the slice are stranded (allocated but unused).
* :class:`BCubeGroupPolicy` (SiPAC/BCube, seed 003 Sec. 2): N = r^(l+1) CUs; a tenant gets a
  sub-SiPAC of r^j CUs (a block of consecutive ids aligned to r^j, i.e. CUs sharing their high
  base-r digits), the smallest r^j >= the request.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from estimator.errors import EstimatorError


class Policy(ABC):
    name = ""

    @property
    @abstractmethod
    def capacity(self) -> int:
        """GPUs in the rack."""

    @abstractmethod
    def allocation_size(self, size: int) -> int | None:
        """GPUs a request of ``size`` would occupy (``None``: no shape can ever hold it)."""

    @abstractmethod
    def place(self, size: int) -> tuple[int, ...] | None:
        """Occupy GPUs for a request of ``size``; ``None`` if no free shape fits now."""

    @abstractmethod
    def release(self, gpus: tuple[int, ...]) -> None:
        """Free GPUs returned by :meth:`place`."""

    @abstractmethod
    def free_count(self) -> int:
        """Free GPUs right now."""

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "capacity": self.capacity}


class LumorphPolicy(Policy):
    name = "lumorph"

    def __init__(self, servers: int, tiles: int = 32):
        if servers < 1:
            raise EstimatorError(f"allocation.servers must be >= 1, got {servers}")
        if not 1 <= tiles <= 32:
            raise EstimatorError(f"allocation.tiles must be 1..32 (a Lightpath wafer has <= 32 tiles), got {tiles}")
        self.servers, self.tiles = servers, tiles
        self._free = [set(range(s * tiles, (s + 1) * tiles)) for s in range(servers)]

    @property
    def capacity(self) -> int:
        return self.servers * self.tiles

    def allocation_size(self, size: int) -> int | None:
        return size if 1 <= size <= self.capacity else None

    def free_count(self) -> int:
        return sum(len(f) for f in self._free)

    def place(self, size: int) -> tuple[int, ...] | None:
        if self.allocation_size(size) is None or self.free_count() < size:
            return None
        fitting = [s for s in range(self.servers) if len(self._free[s]) >= size]
        order = (
            [min(fitting, key=lambda s: (len(self._free[s]), s))]
            if fitting
            else sorted(range(self.servers), key=lambda s: (-len(self._free[s]), s))
        )
        taken: list[int] = []
        for s in order:
            grab = sorted(self._free[s])[: size - len(taken)]
            self._free[s].difference_update(grab)
            taken += grab
            if len(taken) == size:
                break
        return tuple(taken)

    def release(self, gpus: tuple[int, ...]) -> None:
        for g in gpus:
            self._free[g // self.tiles].add(g)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "servers": self.servers, "tiles": self.tiles}


def _powers_of_two_upto(n: int) -> list[int]:
    return [1 << i for i in range(n.bit_length()) if (1 << i) <= n]


class TorusSlicePolicy(Policy):
    name = "torus_slices"

    def __init__(self, dims: tuple[int, int, int]):
        if len(dims) != 3 or any(int(d) < 1 or int(d) & (int(d) - 1) for d in dims):
            raise EstimatorError(f"allocation.torus_dims must be three powers of two, got {list(dims)}")
        self.dims = tuple(int(d) for d in dims)
        self._busy = np.zeros(self.dims, dtype=bool)
        self._shapes: dict[int, list[tuple[int, int, int]]] = {}

    @property
    def capacity(self) -> int:
        return math.prod(self.dims)

    def shapes(self, size: int) -> list[tuple[int, int, int]]:
        """Smallest-volume power-of-two cuboids (all orientations that fit) holding ``size``."""
        if size not in self._shapes:
            sides = [_powers_of_two_upto(d) for d in self.dims]
            cands = [s for s in itertools.product(*sides) if math.prod(s) >= size]
            if not cands:
                self._shapes[size] = []
            else:
                vol = min(math.prod(s) for s in cands)
                # most cubic first (smallest longest side), then lexicographic
                self._shapes[size] = sorted((s for s in cands if math.prod(s) == vol), key=lambda s: (max(s), s))
        return self._shapes[size]

    def allocation_size(self, size: int) -> int | None:
        shapes = self.shapes(size) if size >= 1 else []
        return math.prod(shapes[0]) if shapes else None

    def free_count(self) -> int:
        return int(self.capacity - self._busy.sum())

    def place(self, size: int) -> tuple[int, ...] | None:
        for shape in self.shapes(size) if size >= 1 else []:
            ranges = [range(0, d, s) for d, s in zip(self.dims, shape, strict=True)]
            for x, y, z in itertools.product(*ranges):
                block = (slice(x, x + shape[0]), slice(y, y + shape[1]), slice(z, z + shape[2]))
                if not self._busy[block].any():
                    self._busy[block] = True
                    idx = np.zeros(self.dims, dtype=bool)
                    idx[block] = True
                    return tuple(int(i) for i in np.flatnonzero(idx))
        return None

    def release(self, gpus: tuple[int, ...]) -> None:
        self._busy.reshape(-1)[list(gpus)] = False

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "torus_dims": list(self.dims)}


class BCubeGroupPolicy(Policy):
    name = "bcube_groups"

    def __init__(self, r: int, levels: int):
        if r < 2 or levels < 0:
            raise EstimatorError(f"allocation: SiPAC/BCube needs r >= 2 and l >= 0, got r={r}, l={levels}")
        self.r, self.levels = r, levels
        self._busy = np.zeros(r ** (levels + 1), dtype=bool)

    @property
    def capacity(self) -> int:
        return self.r ** (self.levels + 1)

    def allocation_size(self, size: int) -> int | None:
        if not 1 <= size <= self.capacity:
            return None
        block = 1
        while block < size:
            block *= self.r
        return block

    def free_count(self) -> int:
        return int(self.capacity - self._busy.sum())

    def place(self, size: int) -> tuple[int, ...] | None:
        block = self.allocation_size(size)
        if block is None:
            return None
        for start in range(0, self.capacity, block):
            if not self._busy[start : start + block].any():
                self._busy[start : start + block] = True
                return tuple(range(start, start + block))
        return None

    def release(self, gpus: tuple[int, ...]) -> None:
        self._busy[list(gpus)] = False

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "r": self.r, "l": self.levels}


POLICIES = ("lumorph", "torus_slices", "bcube_groups")


def cubic_power_of_two_dims(n: int) -> tuple[int, int, int]:
    """A near-cubic power-of-two 3D grid of exactly ``n`` GPUs (n a power of two)."""
    if n < 1 or n & (n - 1):
        raise EstimatorError(f"allocation: a 3D-torus rack needs a power-of-two GPU count, got {n}")
    e = n.bit_length() - 1
    parts = [e // 3 + (1 if i < e % 3 else 0) for i in range(3)]
    return tuple(1 << p for p in sorted(parts))  # type: ignore[return-value]


def bcube_shape(n: int, r: int) -> int:
    """``l`` such that ``n == r^(l+1)``, or a one-line error."""
    if r < 2:  # r = 1 (or 0) never grows: the loop below ran forever (`allocate allocation.r=1` hung)
        raise EstimatorError(f"allocation: SiPAC/BCube needs a switch radix r >= 2, got r={r}")
    levels, size = 0, r
    while size < n:
        size *= r
        levels += 1
    if size != n:
        raise EstimatorError(f"allocation: {n} GPUs is not r^(l+1) for r={r} (SiPAC/BCube sizes: {r}, {r*r}, {r**3}, ...)")
    return levels


def make_policy(name: str, gpus: int, tiles: int = 32, r: int = 2) -> Policy:
    """The rack of ``gpus`` GPUs under policy ``name``, with the same GPU count for every policy."""
    if name == "lumorph":
        if not 1 <= tiles <= 32:  # before the modulo (allocation.tiles=0 was a ZeroDivisionError traceback)
            raise EstimatorError(f"allocation.tiles must be 1..32 (a Lightpath wafer has <= 32 tiles), got {tiles}")
        if gpus % tiles:
            raise EstimatorError(f"allocation: {gpus} GPUs is not a whole number of {tiles}-tile Lightpath servers")
        return LumorphPolicy(gpus // tiles, tiles)
    if name == "torus_slices":
        return TorusSlicePolicy(cubic_power_of_two_dims(gpus))
    if name == "bcube_groups":
        return BCubeGroupPolicy(r, bcube_shape(gpus, r))
    raise EstimatorError(f"unknown allocation policy {name!r}; known: {', '.join(POLICIES)}")
