from __future__ import annotations

import itertools
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

# beside the repository unless ORTHOTUNE_DATA_ROOT names it (a git worktree sits one folder deeper)
BESIDE = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA_ROOT = Path(os.environ.get("ORTHOTUNE_DATA_ROOT") or BESIDE).resolve()


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Processed datasets go to a per-session cache, never into the data root."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ORTHOTUNE_CACHE", str(tmp_path_factory.mktemp("cache")))
    mp.setenv("ORTHOTUNE_DATA_ROOT", str(DATA_ROOT))
    torch.set_num_threads(1)
    yield
    mp.undo()


@pytest.fixture(scope="session")
def data_root():
    from orthotune.training import DataRoot

    if not DATA_ROOT.is_dir():
        pytest.fail(f"benchmark data not found beside the repository: {DATA_ROOT}")
    return DataRoot.resolve(DATA_ROOT)


@pytest.fixture(scope="session")
def cora(data_root):
    from orthotune.training import load_node_data

    return load_node_data("cora", "full", data_root)


#: Packages the GPU machine does not have.
HIDDEN = ("ray", "optuna", "ogb")

HIDE = f"""
import sys
from importlib.machinery import PathFinder


class _Hidden:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in {HIDDEN!r}:
            return None
        return PathFinder.find_spec(name, path, target)

    @staticmethod
    def invalidate_caches():
        PathFinder.invalidate_caches()


sys.meta_path[:] = [_Hidden if finder is PathFinder else finder for finder in sys.meta_path]
"""


@pytest.fixture
def without_ray(tmp_path):
    """The environment of a process that cannot import Ray, Optuna or OGB, as on the GPU machine
    `bench/gpu-lease.sh` runs on: a ``sitecustomize`` hides them from the path finder, so
    ``import ray`` fails and ``importlib.util.find_spec("ray")`` is None. Its own orthotune cache."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "ORTHOTUNE_CACHE": str(tmp_path / "cache")}


@dataclass(frozen=True)
class S3Server:
    """A real S3 API on 127.0.0.1 (moto's threaded server) that checks request signatures
    against its IAM users: ``key_id`` and ``secret`` are a user's keys with an S3 policy."""

    endpoint: str  # http://127.0.0.1:PORT
    key_id: str
    secret: str

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.key_id,
                            aws_secret_access_key=self.secret, region_name=S3_REGION)


S3_REGION = "us-east-1"


@pytest.fixture(scope="session")
def s3_server():
    import boto3
    from moto import settings
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    # Signatures are checked after the first three requests, which create the user, its key
    # and its S3 policy: from then on a wrong key or secret is refused, as on AWS.
    # moto counts requests per process, so another in-process server's (the nemesis's) count too
    from moto.core.authorization import ActionAuthenticatorMixin

    ActionAuthenticatorMixin.request_count = 0
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 3
    iam = boto3.client("iam", endpoint_url=endpoint, aws_access_key_id="setup", aws_secret_access_key="setup",
                       region_name=S3_REGION)
    iam.create_user(UserName="orthotune")
    key = iam.create_access_key(UserName="orthotune")["AccessKey"]
    iam.put_user_policy(UserName="orthotune", PolicyName="s3", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    yield S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch, request):
    """A fresh bucket, and the environment as a user sets it for pyarrow and the AWS tools
    (keys, region, endpoint; no profile file of this machine is read). Returns the store URI
    ``s3://BUCKET/store``, which names no endpoint and no credential."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret)
    monkeypatch.setenv("AWS_DEFAULT_REGION", S3_REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    bucket = "ot-" + re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-") + f"-{next(_BUCKETS)}"
    s3_server.client().create_bucket(Bucket=bucket)
    return f"s3://{bucket}/store"


_BUCKETS = itertools.count()
