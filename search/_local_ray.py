"""A local embedded Ray that listens on the loopback interface only.

By default ``ray.init()`` on Linux takes the machine's network address as the node IP, and
Ray's servers bind every interface unless the node IP is a loopback address: the GCS, the
raylet, every worker (the driver and the trials included) and the dashboard agent listened
on ``*``, and the runtime-env agent on the network address (measured, Ray 2.60). Ray's token
authentication (on by default for a new local cluster) was all that protected them.

A loopback node IP makes Ray bind loopback itself: its servers bind localhost when the node
IP is localhost and all interfaces otherwise (``dashboard/agent.py`` says so in source; the
C++ gRPC servers of the GCS, raylet and workers measured the same). Passing
``ray.init(_node_ip_address="127.0.0.1")`` alone does not get there: on Linux
``services.resolve_ip_for_localhost`` swaps a loopback address for the network one unless
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` is off, and Ray reads that variable once, when it is
imported. :func:`loopback_ray` therefore turns it off for the ``ray.init`` call only, in the
environment (for the processes Ray starts) and in the already imported constant.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The only address the local Ray listens on.
LOOPBACK = "127.0.0.1"
#: Ray's switch between single-node (loopback) and cluster node IPs; "0" means single node.
SINGLE_NODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def local_ray_options() -> dict[str, Any]:
    """``ray.init`` keyword arguments for a new local Ray bound to loopback, without a
    dashboard (the store and ``orthotune status`` replace it). Use inside :func:`loopback_ray`.
    ``address="local"``: never join a running Ray ($RAY_ADDRESS, ``ray start``) with these."""
    return {"address": "local", "_node_ip_address": LOOPBACK, "include_dashboard": False,
            "dashboard_host": LOOPBACK}


def starts_local_ray(address: str | None) -> bool:
    """Whether ``ray.init(address=address)`` starts a new local Ray rather than joining one
    ($RAY_ADDRESS, or a ``ray start`` cluster on this machine): only a new one may be bound to
    loopback; a node joining a cluster keeps the cluster's address.

    A cluster known only from Ray's ``ray_current_cluster`` file (no address given, no
    $RAY_ADDRESS) is joined only if it answers: a ``ray start`` head that was killed leaves
    the file behind, and joining it retries for about fifteen minutes before failing."""
    if address not in (None, "local"):
        return False  # an address (ray://, auto, HOST:PORT) always joins a running Ray
    from ray._private.services import canonicalize_bootstrap_address, find_bootstrap_address  # Ray's own rule

    if canonicalize_bootstrap_address(address) is None:
        return True
    found = find_bootstrap_address(None)  # the file's address as written (Ray may swap a loopback host)
    if address is None and not os.environ.get("RAY_ADDRESS") and found and not answers(found):
        print(f"orthotune: note: the Ray recorded on this machine at {found} does not answer (a stopped "
              f"`ray start`?); starting a local Ray instead", file=sys.stderr)
        return True
    return False


def answers(address: str, timeout: float = 2.0) -> bool:
    """Whether something accepts TCP connections at ``HOST:PORT`` (a Ray GCS that is up)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def is_loopback_address(address: str | None) -> bool:
    """Whether ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``) names a Ray on this machine's
    loopback: joining it must keep loopback addresses too (see :func:`loopback_ray`), or Ray
    swaps 127.0.0.1 for the machine's address, where nothing listens, and retries for minutes."""
    if not address or address in ("auto", "local"):
        return False
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


@contextmanager
def loopback_ray() -> Iterator[None]:
    """Single-node mode for the ``ray.init`` inside: a loopback ``_node_ip_address`` stays
    loopback. Restored afterwards (the started Ray keeps its node IP), so a later connection
    to a cluster resolves addresses as usual."""
    from ray._private import ray_constants

    saved_env, saved_flag = os.environ.get(SINGLE_NODE_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[SINGLE_NODE_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False  # read at import, so the imported value too
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        if saved_env is None:
            os.environ.pop(SINGLE_NODE_ENV, None)
        else:
            os.environ[SINGLE_NODE_ENV] = saved_env
