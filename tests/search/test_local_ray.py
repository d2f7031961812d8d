"""The local embedded Ray listens on loopback only, and still wants its token."""

import ipaddress
import os
import socket
import subprocess
import sys
import time

import psutil
import pytest
import yaml

from orthotune.search._local_ray import LOOPBACK, local_ray_options, loopback_ray, starts_local_ray

SPACE = {  # one cell, trainings of a few seconds on Cora: long enough to catch a trial worker listening
    "name": "bind",
    "datasets": ["cora"],
    "repeats": [0],
    "backbones": ["gcn"],
    "depths": [2],
    "original": True,
    "train": {"lr": [0.01], "dropout": 0.0, "epochs": 400, "patience": 400, "hidden": 8},
    "samples": 2,
}


def is_loopback(host: str) -> bool:
    address = ipaddress.ip_address(host.split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped  # an IPv6 socket bound to ::ffff:127.0.0.1
    return address.is_loopback


def listening(root: psutil.Process) -> set[tuple[str, str, str, int]]:
    """(process name, tcp|udp, host, port) that ROOT and its descendants listen on: TCP
    sockets in LISTEN, and UDP sockets bound without a peer."""
    found = set()
    for proc in [root, *root.children(recursive=True)]:
        try:
            name = proc.name()
            for conn in proc.net_connections(kind="inet"):
                tcp = conn.type == socket.SOCK_STREAM
                if (tcp and conn.status == psutil.CONN_LISTEN) or (not tcp and not conn.raddr):
                    found.add((name, "tcp" if tcp else "udp", conn.laddr.ip, conn.laddr.port))
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue  # a worker that ended between the listing and the look
    return found


def exposed(sockets) -> list:
    return sorted(s for s in sockets if not is_loopback(s[2]))


def test_is_loopback_knows_the_forms_ray_uses():
    assert all(map(is_loopback, ["127.0.0.1", "::1", "::ffff:127.0.0.1", "127.0.0.2"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "192.0.2.2", "::ffff:192.0.2.2", "fd00::2"]))


def test_loopback_ray_sets_single_node_mode_only_inside(monkeypatch):
    from ray._private import ray_constants

    monkeypatch.delenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", raising=False)
    before = ray_constants.ENABLE_RAY_CLUSTER
    with loopback_ray():
        assert os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
        assert ray_constants.ENABLE_RAY_CLUSTER is False
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ
    assert ray_constants.ENABLE_RAY_CLUSTER == before
    options = local_ray_options()
    assert options["_node_ip_address"] == LOOPBACK == "127.0.0.1" and options["dashboard_host"] == LOOPBACK
    assert options["address"] == "local" and not options["include_dashboard"]  # a new Ray, never a running one


def test_only_a_new_local_ray_is_bound_to_loopback(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert starts_local_ray(None) and starts_local_ray("local")
    assert not starts_local_ray("10.0.0.5:6379") and not starts_local_ray("ray://head:10001")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")  # a Ray job's driver on the head node
    assert not starts_local_ray(None)


def test_a_ray_recorded_by_a_killed_ray_start_is_not_joined(monkeypatch, tmp_path, capsys):
    """Ray's ``ray_current_cluster`` file outlives a killed ``ray start`` head: a cluster it
    names is joined only while something answers there."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    with socket.socket() as head:
        head.bind(("127.0.0.1", 0))
        head.listen()
        address = f"127.0.0.1:{head.getsockname()[1]}"
        (tmp_path / "ray" / "ray_current_cluster").parent.mkdir()
        (tmp_path / "ray" / "ray_current_cluster").write_text(address)
        assert not starts_local_ray(None)  # a live head: Ray's rule, join it
        assert capsys.readouterr().err == ""
    assert starts_local_ray(None)  # the head is gone, its file stays
    note = capsys.readouterr().err.strip()
    assert note.count("\n") == 0 and address in note and "does not answer" in note


@pytest.mark.slow
def test_a_launched_search_listens_on_loopback_only(tmp_path):
    """A real search through `orthotune launch`: the sockets of the driver and every process
    it started (GCS, raylet, agents, trial workers), sampled while it runs."""
    space = tmp_path / "bind.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    env = {**os.environ, "RAY_ADDRESS": "", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "orthotune.cli", "launch", "--space", str(space),
                             "--store", str(tmp_path / "store"), "--concurrency", "2",
                             "--report-every", "2", "--scheduler", "fifo", "--progress", "plain"],
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    root, seen = psutil.Process(proc.pid), set()
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            seen |= listening(root)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.2)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    names = {name for name, *_ in seen}
    # it saw Ray's servers and a trial's worker, so the check below had something to check
    assert {"gcs_server", "raylet"} <= names, sorted(seen)
    assert any(name.startswith("ray::ImplicitFunc") for name in names), sorted(seen)  # a trial
    print("listening:", *sorted(seen), sep="\n  ")
    assert not exposed(seen), f"listening beyond loopback: {exposed(seen)}"


@pytest.fixture(scope="module")
def local_ray():
    import ray

    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ.pop("RAY_AUTH_MODE", None)  # Ray's default for a new local Ray: token
    with loopback_ray():
        ray.init(**local_ray_options(), num_cpus=1, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()
    if saved is None:
        os.environ.pop("RAY_AUTH_MODE", None)
    else:
        os.environ["RAY_AUTH_MODE"] = saved


@pytest.mark.slow
def test_an_actor_on_the_local_ray_listens_on_loopback_only(local_ray):
    @local_ray.remote(num_cpus=1)
    class Echo:
        def where(self) -> tuple[str, int]:
            return local_ray.util.get_node_ip_address(), os.getpid()

    echo = Echo.remote()
    node_ip, pid = local_ray.get(echo.where.remote())
    gcs_host = local_ray.get_runtime_context().gcs_address.rsplit(":", 1)[0].strip("[]")
    assert is_loopback(node_ip) and is_loopback(gcs_host), (node_ip, gcs_host)  # ::1 where localhost is
    seen = listening(psutil.Process())
    assert any(pid == p.pid for p in psutil.Process().children(recursive=True))  # the actor is ours
    assert {"gcs_server", "raylet"} <= {name for name, *_ in seen}
    assert not exposed(seen), f"listening beyond loopback: {exposed(seen)}"


@pytest.mark.slow
def test_the_local_ray_refuses_calls_without_its_token(local_ray):
    import grpc
    from ray._raylet import AuthenticationMode, AuthenticationTokenLoader, get_authentication_mode
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    assert get_authentication_mode() == AuthenticationMode.TOKEN
    token = list(AuthenticationTokenLoader.instance().get_token_for_http_header().items())
    with grpc.insecure_channel(local_ray.get_runtime_context().gcs_address) as channel:
        nodes = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetAllNodeInfo

        def call(metadata):
            return nodes(gcs_service_pb2.GetAllNodeInfoRequest(), metadata=metadata, timeout=10)

        assert len(call(token).node_info_list) == 1  # with the token: answered
        for metadata in ([], [("authorization", "Bearer not-the-token")]):
            with pytest.raises(grpc.RpcError) as refused:
                call(metadata)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
