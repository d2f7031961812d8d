"""What keeps a search from waiting forever or leaking: :class:`NodeWatch` (``_node_watch``,
with Ray) ends a search that no node of the cluster can run, and the store's credentials never
reach a trial. Light to import (Ray loads where it is used): `plan` and the input checks use it.

A lost worker node is Ray Tune's to handle: the trials it ran are retried (``FailureConfig``)
on the nodes left. But with no node left that can run a trial, Tune waits for one without
end (it only warns that resources are insufficient, since an autoscaler may still add a
node). :class:`NodeWatch` gives the cluster :data:`NODE_WAIT_S` seconds
(``$ORTHOTUNE_NODE_WAIT_S``; longer than an autoscaled GPU node takes to start) and then
ends the search with :class:`NoNodeLeft`, which ``launch`` records as ``crashed`` with the
command that resumes it.

When a node's raylet dies unexpectedly, Ray's agent on that node publishes the last lines of
its ``raylet.out`` to every driver, which prints them on its stdout: dozens of the raylet's
``[state-dump]`` debug lines in the user's terminal. :func:`ray_dumps_kept_in_logs` keeps the
message's own sentence and leaves the lines to ``raylet.out`` (Ray's logs, on that node).

Ray Tune copies the driver's AWS credentials (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_SECURITY_TOKEN``) into every trial actor's ``runtime_env``, and
Ray's runtime-env agent logs each runtime env it creates, in clear, in
``runtime_env_agent.log`` on every node (measured, Ray 2.60). A trial never touches the store
(the driver's recorder writes every row), so for the duration of a search they are left out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from orthotune.core import OrthotuneError

#: How long a search waits for a node that can run one of its trials, by default.
NODE_WAIT_S = 600.0
NODE_WAIT_ENV = "ORTHOTUNE_NODE_WAIT_S"
#: The credentials Ray Tune would hand to each trial; the driver alone needs them.
DRIVER_ONLY_ENV = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"})


@contextmanager
def credentials_kept_from_trials() -> Iterator[None]:
    """Inside, Ray Tune puts none of :data:`DRIVER_ONLY_ENV` into the trial actors' runtime env."""
    from ray.tune.execution import class_cache

    saved = class_cache.ENV_VARS_TO_PROPAGATE
    class_cache.ENV_VARS_TO_PROPAGATE = frozenset(saved) - DRIVER_ONLY_ENV
    try:
        yield
    finally:
        class_cache.ENV_VARS_TO_PROPAGATE = saved


#: Where Ray's message about a dead raylet starts quoting that raylet's log.
RAYLET_LOG_TAIL = re.compile(r"Last \d+ lines of the Raylet logs:.*", re.DOTALL)


@contextmanager
def ray_dumps_kept_in_logs() -> Iterator[None]:
    """Inside, a raylet's published log tail reaches the driver's output as its first sentence
    only (the lines stay in that node's ``raylet.out``). Ray's thread that prints errors
    published to the driver looks the printer up on each message, so it is wrapped here."""
    from ray._private import worker

    printer = worker.print_to_stdstream

    def without_raylet_logs(data: dict, *args: Any, **kwargs: Any) -> None:
        if data.get("pid") == "raylet":
            data = {**data, "lines": [RAYLET_LOG_TAIL.sub("its last log lines are in raylet.out on that node", line)
                                      for line in data.get("lines", [])]}
        printer(data, *args, **kwargs)

    worker.print_to_stdstream = without_raylet_logs
    try:
        yield
    finally:
        worker.print_to_stdstream = printer


def refuse_password_in_url(url: str | None, option: str) -> None:
    """A database URL with a password (``postgresql://user:PASSWORD@host/db``) is refused: the
    search's options are saved in its record in the store and shown in messages. The drivers
    read a password from where they always do, without it in the URL."""
    if not url or "://" not in url:
        return
    scheme, _, rest = url.partition("://")
    authority = rest.split("/", 1)[0]
    if "@" in authority and ":" in authority.rsplit("@", 1)[0]:
        user = authority.rsplit("@", 1)[0].split(":", 1)[0]
        shown = f"{scheme}://{user}:***@{authority.rsplit('@', 1)[1]}{rest[len(authority):]}"
        raise OrthotuneError(f"{option} {shown!r} carries a password, which the search's record in the store would "
                             f"keep; remove it from the URL and give it as the database driver reads it "
                             f"(PostgreSQL: PGPASSWORD or ~/.pgpass; MySQL: ~/.my.cnf)")


class NoNodeLeft(OrthotuneError):
    """No node of the cluster could run any waiting trial for :data:`NODE_WAIT_S` seconds."""


def node_wait_s() -> float:
    """:data:`NODE_WAIT_S`, or ``$ORTHOTUNE_NODE_WAIT_S`` where set to a positive number."""
    raw = os.environ.get(NODE_WAIT_ENV, "")
    try:
        value = float(raw) if raw else NODE_WAIT_S
    except ValueError:
        raise OrthotuneError(f"{NODE_WAIT_ENV}={raw!r} must be a number of seconds > 0") from None
    if not value > 0:
        raise OrthotuneError(f"{NODE_WAIT_ENV}={raw!r} must be a number of seconds > 0")
    return value
