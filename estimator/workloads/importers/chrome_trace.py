"""Chrome trace-event JSON (the container Kineto and Horovod both write): events and intervals.

Only what the importers need: complete events (``ph: X``) with checked ``ts``/``dur`` in
microseconds, begin/end pairs (``B``/``E``) per track, and interval containment queries.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field
from typing import Any

from estimator import limits
from estimator.workloads.importers._common import BadInput, mapping, number, scalar_key

US = 1e-6
#: dependencies per node of ``limits.graph_nodes`` that :func:`observed_order_deps` may make
DEPS_PER_NODE = 8


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
    """Answers "which span of this set, on this track, contains time t" (innermost wins: the
    shortest; among equally long ones the latest in (start, -duration) order), in O(log n) per
    question after O(n log n) preparation, however the spans nest or overlap (a walk back over
    earlier spans would be O(n) per question under one long enclosing span)."""

    def __init__(self, spans: list[Span]):
        self._by_track = {track: _innermost(track_spans) for track, track_spans in _group(spans).items()}

    def find(self, track: Any, t: float) -> Span | None:
        points, at, after = self._by_track.get(track, ((), (), ()))
        i = bisect.bisect_right(points, t) - 1
        if i < 0:
            return None
        return at[i] if points[i] == t else after[i]


def _innermost(spans: list[Span]) -> tuple[list[float], list[Span | None], list[Span | None]]:
    """At every distinct start or end x (sorted): the innermost span containing x (spans are
    closed intervals) and the one containing the open interval after x, by a sweep over a heap
    keyed (duration, -position) with ended spans dropped lazily."""
    order = sorted(spans, key=lambda s: (s.ts, -s.dur))
    points = sorted({s.ts for s in order} | {s.end for s in order})
    heap: list[tuple[float, int, float]] = []
    at: list[Span | None] = []
    after: list[Span | None] = []
    k = 0
    for x in points:
        while k < len(order) and order[k].ts <= x:
            heapq.heappush(heap, (order[k].dur, -k, order[k].end))
            k += 1
        while heap and heap[0][2] < x:
            heapq.heappop(heap)
        at.append(order[-heap[0][1]] if heap else None)
        while heap and heap[0][2] <= x:  # ends at x: not inside the open interval after x
            heapq.heappop(heap)
        after.append(order[-heap[0][1]] if heap else None)
    return points, at, after


class Covered:
    """Answers "does any span of this set (any track) contain time t" in O(log n): the union of
    the spans as disjoint closed intervals."""

    def __init__(self, spans: list[Span]):
        self._starts: list[float] = []
        self._ends: list[float] = []
        for s in sorted(spans, key=lambda s: s.ts):
            if self._ends and s.ts <= self._ends[-1]:
                self._ends[-1] = max(self._ends[-1], s.end)
            else:
                self._starts.append(s.ts)
                self._ends.append(s.end)

    def __contains__(self, t: float) -> bool:
        i = bisect.bisect_right(self._starts, t) - 1
        return i >= 0 and t <= self._ends[i]


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
    latest span of that stream that ended no later than it started (an observed happens-before;
    the latest end wins, then the latest position). ``spans`` must be sorted by start time, so a
    span that ended before one start has ended before every later one: each stream keeps a heap
    of its unfinished spans and its latest finished one (O(log n) per span and stream). The
    dependencies number up to spans x streams: more than :data:`DEPS_PER_NODE` x
    ``limits.graph_nodes`` is refused before any is made.
    """
    streams = [stream_of(s) for s in spans]
    distinct = len(set(streams))
    budget = DEPS_PER_NODE * limits.get().graph_nodes
    if len(spans) * max(distinct - 1, 0) > budget:
        raise BadInput(f"{len(spans)} events on {distinct} streams/threads could make {len(spans) * (distinct - 1)} "
                       f"dependencies, more than {budget} ({DEPS_PER_NODE} x limits.graph_nodes)")
    deps: dict[int, list[int]] = {i: [] for i in range(len(spans))}
    last_on: dict[Any, int] = {}
    running: dict[Any, list[tuple[float, int]]] = {}  # per stream: (end, position) of unfinished spans
    latest: dict[Any, tuple[float, int]] = {}  # per stream: the finished span with the largest (end, position)
    for i, s in enumerate(spans):
        stream = streams[i]
        if stream in last_on:
            deps[i].append(last_on[stream])
        for other, heap in running.items():
            while heap and heap[0][0] <= s.ts:
                done = heapq.heappop(heap)
                if other not in latest or done > latest[other]:
                    latest[other] = done
            if other != stream and other in latest:
                deps[i].append(latest[other][1])
        last_on[stream] = i
        heapq.heappush(running.setdefault(stream, []), (s.end, i))
    return deps
