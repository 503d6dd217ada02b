"""A per-process cache of compiled schedules shared by every instance with the same config.

The estimate API builds a fresh fabric for every estimate, so a :class:`LibraryFabric`'s own
per-instance cache would recompile (e.g. SiPAC at 512 CUs: ~0.2 s) every time. Fabrics that mix in
:class:`SharedCompiled` keep compiled schedules per (fabric class, config, collective, algorithm,
group size) for the life of the process; compiled schedules are immutable, so sharing is safe.
"""

from __future__ import annotations

from typing import Any

from estimator.collectives.pricing import CompiledSchedule

_CACHE: dict[tuple[Any, ...], CompiledSchedule] = {}
MAX_ENTRIES = 4096


class SharedCompiled:
    def compiled(self, collective: str, algorithm: str, n: int) -> CompiledSchedule:  # type: ignore[override]
        key = (type(self).__name__, tuple(sorted(self.config.to_dict().items())), collective, algorithm, n)  # type: ignore[attr-defined]
        hit = _CACHE.get(key)
        if hit is None:
            hit = super().compiled(collective, algorithm, n)  # type: ignore[misc]
            if len(_CACHE) >= MAX_ENTRIES:
                _CACHE.clear()
            _CACHE[key] = hit
        return hit
