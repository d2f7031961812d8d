"""Remote searches through Ray's Jobs API: submit the driver to a cluster's head node, read
jobs' states and follow their logs.

The driver then runs on the head node, so the client (a laptop) may disconnect; the search
goes on and writes its store there. The project travels as the job's runtime environment:
a staged copy of the ``orthotune`` package (its ``__init__`` and its layers, in the installed
layout, whatever the local install is: wheel or editable checkout) as ``working_dir``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from orthotune import LAYERS
from orthotune.core import CACHE_ENV, OrthotuneError, one_line

#: Environment variables handed to the job's driver when set on the client.
FORWARDED_ENV = ("ORTHOTUNE_DATA_ROOT", CACHE_ENV)
#: Where the client looks for the cluster's address when --address is not given.
ADDRESS_ENV = ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS")
#: The subpackages of ``orthotune``, its layers: in an editable install the package is the
#: repository root, whose other folders (tests, runs, .venv) must not travel.
SUBPACKAGES = LAYERS
#: Left out of the staged package: caches, never code.
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache")


def dashboard_address(address: str | None) -> str:
    """The Jobs API address: ``--address``, else $RAY_API_SERVER_ADDRESS or $RAY_ADDRESS; it
    must be the dashboard's HTTP address (the Jobs API), not ``ray://`` or the GCS port."""
    address = address or next((os.environ[k] for k in ADDRESS_ENV if os.environ.get(k)), None)
    if not address:
        raise OrthotuneError("no Ray cluster given: pass --address http://HEAD:8265 (the dashboard's address) "
                             "or set RAY_API_SERVER_ADDRESS")
    if not address.startswith(("http://", "https://")):
        raise OrthotuneError(f"--address {address!r} must be the Ray dashboard's HTTP address for the Jobs API "
                             f"(http://HEAD:8265)")
    return address


def auth_headers() -> dict[str, str]:
    """The bearer token of a cluster with Ray's token authentication, found where ``ray``
    itself looks: $RAY_AUTH_TOKEN, the file $RAY_AUTH_TOKEN_PATH, else ``~/.ray/auth_token``.

    Given explicitly because Ray's client only sends it when this process runs with
    RAY_AUTH_MODE=token; a cluster without authentication ignores the header.
    """
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    if not token and Path(path).is_file():
        token = Path(path).read_text(encoding="utf-8").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def connect(address: str | None) -> Any:
    """A ``JobSubmissionClient`` for the cluster at ``address`` (see :func:`dashboard_address`)."""
    from ray.job_submission import JobSubmissionClient

    address = dashboard_address(address)
    try:
        return JobSubmissionClient(address, headers=auth_headers())
    except (ConnectionError, RuntimeError) as error:  # Ray's messages run over many lines
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise OrthotuneError(f"cannot reach the Ray Jobs API at {address}: {first}") from None


@contextmanager
def staged_package() -> Iterator[Path]:
    """A temporary folder holding the ``orthotune`` package in its installed layout."""
    import orthotune

    with tempfile.TemporaryDirectory(prefix="orthotune-job-") as folder:
        target = Path(folder) / "orthotune"
        target.mkdir()
        shutil.copy2(orthotune.__file__, target / "__init__.py")
        for name in SUBPACKAGES:
            spec = importlib.util.find_spec(f"orthotune.{name}")
            source = Path(list(spec.submodule_search_locations)[0])
            shutil.copytree(source, target / name, ignore=IGNORED)
        yield Path(folder)


def driver_arguments(argv: Sequence[str], space_file: str | None, staged_space: str | None) -> list[str]:
    """The client's ``launch`` arguments for the driver on the head: without ``--submit``,
    with ``--address auto`` (the cluster the job runs in) and the space file's staged name."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        flag, _, value = word.partition("=")
        if word == "--submit":
            continue
        if flag == "--address":
            skip = not value
            continue
        if space_file is not None and flag == "--space":
            out += ["--space", staged_space]
            skip = not value
            continue
        out.append(word)
    return ["launch", *out, "--address", "auto"]


def runtime_env(folder: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """The job's runtime environment: the staged folder as its working folder (on its
    PYTHONPATH, so ``python -m orthotune.cli`` finds it) and the forwarded variables."""
    forwarded = {key: os.environ[key] for key in FORWARDED_ENV if os.environ.get(key)}
    return {"working_dir": str(folder), "env_vars": {**forwarded, "PYTHONUNBUFFERED": "1", **env}}


#: How long a submission waits for a freshly started head's job agent (Ray answers
#: "No available agent" until it is up), retrying every 3 s.
AGENT_WAIT_S = 90.0


def submit(address: str | None, argv: Sequence[str], space_file: str | None, metadata: Mapping[str, str],
           env: Mapping[str, str] | None = None) -> str:
    """Submit ``orthotune launch ARGV`` as a Ray job; returns its submission id."""
    client = connect(address)
    with staged_package() as folder:
        staged_space = None
        if space_file is not None:
            staged_space = f"space-{Path(space_file).name}"
            shutil.copyfile(space_file, folder / staged_space)
        entrypoint = shlex.join(["python", "-m", "orthotune.cli", *driver_arguments(argv, space_file, staged_space)])
        deadline = time.monotonic() + AGENT_WAIT_S
        while True:
            try:
                return client.submit_job(entrypoint=entrypoint, runtime_env=runtime_env(folder, env or {}),
                                         metadata=dict(metadata))
            except (ConnectionError, RuntimeError) as error:
                # a head that has just started serves the API before its job agent is up
                if "No available agent" in str(error) and time.monotonic() < deadline:
                    time.sleep(3.0)
                    continue
                raise OrthotuneError(f"the Ray Jobs API refused the job: {one_line(error)}") from None


def job_info(client: Any, job: str) -> Any:
    """The job's details (state, times, message); an unknown id is bad input."""
    try:
        return client.get_job_info(job)
    except RuntimeError as error:
        raise OrthotuneError(f"no job {job!r} on this cluster: {one_line(error)}") from None


def list_jobs(client: Any) -> list[Any]:
    return sorted(client.list_jobs(), key=lambda job: job.start_time or 0)


def format_jobs(jobs: Sequence[Any]) -> str:
    """A table of jobs: id, state, search, start and end times, and Ray's message."""
    if not jobs:
        return "no jobs on this cluster"
    rows = [f"{'job':<30} {'state':<10} {'search':<28} {'started':<19} {'ended':<19} message"]
    for job in jobs:
        search = (job.metadata or {}).get("orthotune_search", "-")
        rows.append(f"{job.submission_id or job.job_id or '-':<30} {str(job.status):<10} {search:<28} "
                    f"{_time(job.start_time):<19} {_time(job.end_time):<19} {job.message or ''}")
    return "\n".join(rows)


def follow_logs(client: Any, job: str, out: Any = None) -> str:
    """Print the job's logs as they come until it ends; returns its final state."""
    out = out or sys.stdout
    job_info(client, job)  # an unknown id fails here, in one line

    async def tail() -> None:
        async for chunk in client.tail_job_logs(job):
            out.write(chunk)
            out.flush()

    asyncio.run(tail())
    return str(client.get_job_status(job))


def print_logs(client: Any, job: str, out: Any = None) -> str:
    """Print the job's logs so far; returns its state."""
    out = out or sys.stdout
    job_info(client, job)
    out.write(client.get_job_logs(job))
    out.flush()
    return str(client.get_job_status(job))


def _time(ms: int | None) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S") if ms else "-"


