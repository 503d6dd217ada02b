"""NumPy helpers shared by the packet-level engines (no Python object per packet).

* :func:`group_rank` — position of each element among the elements with the same key, in the
  given order (how many same-key elements precede it). Used to enqueue several packets into one
  queue in the same slot, and to admit arrivals to a shared buffer in order.
* :func:`fifo_departures` — the Lindley recursion of FIFO output ports, vectorised over many
  ports at once: ``done_k = max(ready_k, done_{k-1}) + service``.
"""

from __future__ import annotations

import numpy as np


def group_rank(keys: np.ndarray) -> np.ndarray:
    """``rank[i]`` = number of ``j < i`` with ``keys[j] == keys[i]`` (stable, vectorised)."""
    n = keys.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    idx = np.arange(n)
    start = np.ones(n, dtype=bool)
    start[1:] = sk[1:] != sk[:-1]
    first = np.maximum.accumulate(np.where(start, idx, 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = idx - first
    return rank


def fifo_departures(
    port: np.ndarray, ready: np.ndarray, service: np.ndarray, free: np.ndarray
) -> np.ndarray:
    """Completion times of packets served FIFO by output ports.

    ``port[i]`` is packet i's port, ``ready[i]`` the earliest time it may start, ``service[p]``
    each port's per-packet transmission time and ``free[p]`` when port p finishes its current
    backlog. Packets of one port are served in order of ``ready`` (ties: given order).
    ``free`` is updated in place. Returns ``done[i]`` (end of transmission).

    Within a port's run of k packets sorted by ready time,
    ``done_k = (k+1)·s + max(free, max_{j<=k}(ready_j - j·s))`` — a prefix maximum, computed for
    all ports at once by offsetting each run so a global running maximum never crosses runs.
    """
    n = port.shape[0]
    if n == 0:
        return np.zeros(0)
    order = np.lexsort((ready, port))
    p = port[order]
    r = ready[order]
    s = service[p]
    idx = np.arange(n)
    start = np.ones(n, dtype=bool)
    start[1:] = p[1:] != p[:-1]
    first = np.maximum.accumulate(np.where(start, idx, 0))
    k = idx - first
    run = np.cumsum(start) - 1
    v = r - k * s
    span = float(np.max(np.abs(v))) + float(np.max(np.abs(free[p]))) + 1.0
    offset = run * (4.0 * span)
    prefix = np.maximum.accumulate(v + offset) - offset
    done_sorted = (k + 1) * s + np.maximum(free[p], prefix)
    last = np.ones(n, dtype=bool)
    last[:-1] = start[1:]
    free[p[last]] = done_sorted[last]
    done = np.empty(n)
    done[order] = done_sorted
    return done
