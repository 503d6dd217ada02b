"""Check a Ray cluster address before joining it: one error line in a few seconds, with a hint.

``ray.init(address=...)`` retries an address it cannot use for 20 s to minutes and prints Ray's
own warning lines meanwhile (an unknown host is retried without end). :func:`check_address` asks,
each within :data:`TIMEOUT_S`:

1. ``auto``: the address ``ray start`` recorded (``$RAY_ADDRESS``, else the
   ``ray_current_cluster`` file in Ray's temporary folder). Ray's own fallback — joining any GCS
   process it finds on the machine, e.g. another user's or another sweep's private instance — is
   not used.
2. the host name resolves;
3. something accepts a TCP connection on the port;
4. (``host:port`` of a GCS, not ``ray://`` clients) a Ray GCS answers there and accepts this
   process's credentials (a token-protected cluster refuses a caller without its token at once).

It returns the address to pass to ``ray.init``.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from estimator.errors import EstimatorError
from estimator.files import quiet_stderr

TIMEOUT_S = 3.0
HINT = "start one with `ray start --head` (then ray.address=auto) or use ray.address=local for a private instance"


def check_address(address: str) -> str:
    """The address to join, checked (see the module docstring); one error line otherwise."""
    label = f"ray.address={address!r}"
    target = _auto() if address == "auto" else address
    client = target.startswith("ray://")
    host, port = _split(target.removeprefix("ray://"), label)
    _resolve(host, label)
    _connect(host, port, label)
    if not client:
        _probe_gcs(f"{host}:{port}", label)
    return target


def _auto() -> str:
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if env:
        return env
    try:
        from ray._private.utils import read_ray_address

        recorded = read_ray_address(None)
    except Exception:  # another Ray version: only the environment
        recorded = None
    if not recorded:
        raise EstimatorError("ray.address='auto': no cluster to join ($RAY_ADDRESS is not set and no `ray start` "
                             f"address is recorded on this machine); {HINT}")
    return str(recorded)


def _split(target: str, label: str) -> tuple[str, int]:
    host, sep, port = target.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise EstimatorError(f"{label}: expected host:port (or ray://host:port, auto, local); {HINT}")
    return host, int(port)


def _resolve(host: str, label: str) -> None:
    """Resolve ``host`` in a thread (``getaddrinfo`` has no timeout of its own)."""
    result: list[Any] = []

    def lookup() -> None:
        try:
            result.append(socket.getaddrinfo(host, None))
        except OSError as exc:
            result.append(exc)

    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(TIMEOUT_S)
    if not result:
        raise EstimatorError(f"{label}: looking up host {host!r} took more than {TIMEOUT_S:g} s; {HINT}")
    if isinstance(result[0], OSError):
        reason = getattr(result[0], "strerror", None) or result[0]
        raise EstimatorError(f"{label}: unknown host {host!r} ({reason}); {HINT}")


def _connect(host: str, port: int, label: str) -> None:
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT_S):
            pass
    except TimeoutError:
        raise EstimatorError(f"{label}: no answer from {host}:{port} within {TIMEOUT_S:g} s (unreachable or "
                             f"filtered); {HINT}") from None
    except OSError as exc:
        raise EstimatorError(f"{label}: cannot connect to {host}:{port} ({exc.strerror or exc}); {HINT}") from None


def _probe_gcs(address: str, label: str) -> None:
    """Ask the GCS for its cluster id with Ray's own client (the credentials ``ray.init`` would
    use); Ray's C++ warning lines are silenced."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        from ray._raylet import InnerGcsClient
    except ImportError:  # another Ray version: ray.init decides
        return
    with quiet_stderr():
        try:
            InnerGcsClient.standalone(address, None, int(TIMEOUT_S * 1000))
            return
        except Exception as exc:  # Ray raises AuthenticationError, RpcError, ...
            problem = exc
    text = str(problem).strip().splitlines()[0] if str(problem).strip() else type(problem).__name__
    if "auth" in (type(problem).__name__ + text).lower():
        raise EstimatorError(f"{label}: the cluster at {address} refuses this process: it requires Ray's auth token "
                             "(set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN, or the token file, as for its "
                             "`ray start`); use ray.address=local for a private instance")
    raise EstimatorError(f"{label}: no Ray GCS answers at {address} ({text[:120]}); {HINT}")
