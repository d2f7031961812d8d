"""A session's Ray: Tune's settings for the duration of the search, and a local embedded Ray
(dashboard off, bound to localhost) or the given cluster, with how many trials it fits."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from orthotune.core import OrthotuneError
from orthotune.search._gpu_share import session_fits
from orthotune.search._guards import credentials_kept_from_trials, ray_dumps_kept_in_logs
from orthotune.search._options import LaunchOptions
from orthotune.search._startup import callback_usage_by_name, trials_on_started_workers

#: Settings Ray Tune reads only from the environment (it has no API for them): our progress
#: display replaces Tune's tables; the store and our TensorBoard logger replace Tune's own
#: JSON/CSV/TBX loggers; Tune's experiment state is never read back (a search resumes from
#: the store), so it is saved rarely; SIGINT is ours (``_ending.stop_on_signals``, which hands
#: it to Tune's graceful stop and records the interruption). Set only while a search runs
#: (a value the user set wins), then restored.
TUNE_SETTINGS = {"RAY_AIR_NEW_OUTPUT": "0", "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
                 "TUNE_GLOBAL_CHECKPOINT_S": "300", "TUNE_DISABLE_SIGINT_HANDLER": "1"}


@contextmanager
def tune_settings() -> Iterator[None]:
    """:data:`TUNE_SETTINGS` in the environment for the duration of a search only."""
    saved = {key: os.environ.get(key) for key in TUNE_SETTINGS}
    for key, value in TUNE_SETTINGS.items():
        os.environ.setdefault(key, value)
    try:
        # the store's keys stay in the driver (and out of Ray's logs); a dead raylet's debug
        # dump stays in its log (and out of the user's terminal); the first trials start
        # about 1.5 s sooner (_startup)
        with credentials_kept_from_trials(), ray_dumps_kept_in_logs(), trials_on_started_workers(), \
                callback_usage_by_name():
            yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def start_ray(options: LaunchOptions) -> int:
    """A local embedded Ray (dashboard off, bound to localhost), or the given cluster.

    Returns how many trials its resources fit at once: the default concurrency. Without a
    limit, Tune with Optuna and reused actors ran one trial at a time on 2 CPUs (measured:
    1 running, 2 pending throughout), so orthotune always sets one.
    """
    import ray

    from orthotune.search._local_ray import is_loopback_address, local_ray_options, loopback_ray, starts_local_ray

    # Without Tune's JSON/CSV loggers (the store is the record) its result grid warns once
    # per trial that it found no metrics files: thousands of lines for a large search.
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    if not ray.is_initialized() and not starts_local_ray(options.address):
        # a cluster: --address, or $RAY_ADDRESS (a Ray job's driver on the head node)
        with loopback_ray() if is_loopback_address(options.address) else nullcontext():
            ray.init(address=options.address, log_to_driver=False)
    elif not ray.is_initialized():
        with loopback_ray():  # every Ray server and worker listens on 127.0.0.1 only
            ray.init(**local_ray_options(), log_to_driver=False, configure_logging=True,
                     logging_level="ERROR")
    resources = ray.cluster_resources()
    if options.gpus_per_trial and not resources.get("GPU"):
        raise OrthotuneError(f"gpus_per_trial={options.gpus_per_trial} but the Ray cluster has no GPU")
    fits = int(resources.get("CPU", 1) // options.cpus_per_trial)
    if options.gpus_per_trial:
        fits = min(fits, int(resources.get("GPU", 0) // options.gpus_per_trial))
    return max(1, session_fits(options, fits))  # --gpus-per-trial auto: measures each cell, caps by GPUs
