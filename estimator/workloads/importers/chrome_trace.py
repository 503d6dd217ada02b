"""Chrome trace-event JSON (the container Kineto and Horovod both write): events and intervals.

Only what the importers need: complete events (``ph: X``) with checked ``ts``/``dur`` in
microseconds, begin/end pairs (``B``/``E``) per track, and interval containment queries.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from estimator.workloads.importers._common import BadInput, mapping, number, scalar_key

US = 1e-6


@dataclass
class Span:
    """One timed event: ``[ts, ts + dur)`` in microseconds on a track (pid, tid)."""

    name: str
    cat: str
    ts: float
    dur: float
    track: tuple[Any, Any]
    args: dict[str, Any] = field(default_factory=dict)
    index: int = 0

    @property
    def end(self) -> float:
        return self.ts + self.dur


def event_list(doc: Any, what: str) -> list[dict[str, Any]]:
    """The ``traceEvents`` list of a trace object (or the document itself if it is a list)."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise BadInput(f"not a {what}: no traceEvents list")
    return events


def complete_spans(events: list[Any], cats: set[str] | None = None) -> list[Span]:
    """All ``ph: X`` events (optionally only some categories), checked and in file order."""
    spans = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", ""))
        if cats is not None and cat not in cats:
            continue
        where = f"event #{i} ({str(ev.get('name', '?'))[:60]!r})"
        ts = number(ev.get("ts"), f"{where} ts", minimum=-1e300)
        dur = number(ev.get("dur", 0), f"{where} dur")
        args = ev.get("args", {})
        track = (scalar_key(ev.get("pid"), f"{where} pid"), scalar_key(ev.get("tid"), f"{where} tid"))
        spans.append(Span(str(ev.get("name", "")), cat, ts, dur, track,
                          mapping(args, f"{where} args") if args is not None else {}, i))
    return spans


class Enclosers:
    """Answers "which span of this set, on this track, contains time t" (innermost wins)."""

    def __init__(self, spans: list[Span]):
        self._by_track: dict[Any, tuple[list[float], list[Span], list[float]]] = {}
        for s in sorted(spans, key=lambda s: (s.ts, -s.dur)):
            starts, items, max_end = self._by_track.setdefault(s.track, ([], [], []))
            starts.append(s.ts)
            items.append(s)
            max_end.append(max(s.end, max_end[-1]) if max_end else s.end)

    def find(self, track: Any, t: float) -> Span | None:
        starts, items, max_end = self._by_track.get(track, ([], [], []))
        best = None
        i = bisect.bisect_right(starts, t) - 1
        while i >= 0 and max_end[i] >= t:  # no span before i reaches t once the running max end is < t
            s = items[i]
            if s.end >= t and (best is None or s.dur < best.dur):
                best = s
            i -= 1
        return best


def top_level(spans: list[Span]) -> list[Span]:
    """Spans not nested inside another span of the same track."""
    out = []
    for track_spans in _group(spans).values():
        end = -float("inf")
        for s in sorted(track_spans, key=lambda s: (s.ts, -s.dur)):
            if s.ts >= end:
                out.append(s)
                end = s.end
    return sorted(out, key=lambda s: (s.ts, s.index))


def _group(spans: list[Span]) -> dict[Any, list[Span]]:
    out: dict[Any, list[Span]] = {}
    for s in spans:
        out.setdefault(s.track, []).append(s)
    return out


def observed_order_deps(spans: list[Span], stream_of: Any) -> dict[int, list[int]]:
    """Dependencies that respect what the trace shows (keys/values are positions in ``spans``).

    Each span depends on the previous span of its own stream and, for every other stream, on the
    latest span of that stream that ended no later than it started (an observed happens-before).
    ``spans`` must be sorted by start time.
    """
    deps: dict[int, list[int]] = {i: [] for i in range(len(spans))}
    last_on: dict[Any, int] = {}
    finished: dict[Any, list[tuple[float, int]]] = {}
    for i, s in enumerate(spans):
        stream = stream_of(s)
        if stream in last_on:
            deps[i].append(last_on[stream])
        for other, ends in finished.items():
            if other == stream:
                continue
            k = bisect.bisect_right(ends, (s.ts, float("inf")))
            if k:
                deps[i].append(ends[k - 1][1])
        last_on[stream] = i
        bisect.insort(finished.setdefault(stream, []), (s.end, i))
    return deps
