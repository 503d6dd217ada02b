"""A bank of bounded FIFO queues stored as NumPy ring buffers (one row per queue).

Each queue holds up to ``capacity`` packets; a packet is a set of integer fields (destination,
source, birth slot, step tag ...) stored column-wise. Several packets may be pushed into the same
queue in one call; they enter in the given order, and those that do not fit are refused (the
caller counts them as lost).
"""

from __future__ import annotations

import numpy as np

from estimator.packetsim.vector import group_rank


class FifoBank:
    def __init__(self, queues: int, capacity: int, fields: tuple[str, ...]):
        self.capacity = int(capacity)
        self.data = {f: np.zeros((queues, self.capacity), dtype=np.int64) for f in fields}
        self.head = np.zeros(queues, dtype=np.int64)
        self.count = np.zeros(queues, dtype=np.int64)

    def push(self, queue: np.ndarray, **values: np.ndarray) -> np.ndarray:
        """Append packets; return the boolean mask of those accepted."""
        rank = group_rank(queue)
        ok = self.count[queue] + rank < self.capacity
        q = queue[ok]
        pos = (self.head[q] + self.count[q] + rank[ok]) % self.capacity
        for name, column in values.items():
            self.data[name][q, pos] = column[ok]
        self.count += np.bincount(q, minlength=self.count.shape[0])
        return ok

    def peek(self, queue: np.ndarray) -> dict[str, np.ndarray]:
        """Head-of-line fields of (non-empty) queues."""
        pos = self.head[queue]
        return {name: col[queue, pos] for name, col in self.data.items()}

    def pop(self, queue: np.ndarray) -> None:
        """Remove the head of each (distinct, non-empty) queue."""
        self.head[queue] = (self.head[queue] + 1) % self.capacity
        self.count[queue] -= 1

    def free(self, queue: np.ndarray) -> np.ndarray:
        return self.capacity - self.count[queue]
