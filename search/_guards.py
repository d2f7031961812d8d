"""What keeps a search's secrets in the driver: the store's credentials never reach a trial.

Ray Tune copies the driver's AWS credentials (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_SECURITY_TOKEN``) into every trial actor's ``runtime_env``, and
Ray's runtime-env agent logs each runtime env it creates, in clear, in
``runtime_env_agent.log`` on every node (measured, Ray 2.60). A trial never touches the store
(the driver's recorder writes every row), so for the duration of a search they are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
