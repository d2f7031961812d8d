"""ray_cluster.yaml checked offline: with Ray's own cluster-config schema and validation, and,
on the parsed config, for each security point (token authentication, closed security group,
least-privilege instance profiles, only a wheel shipped, dashboard on loopback). Every check
is shown to reject a config broken in its way."""

import ast
import copy
import ipaddress
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import ray.autoscaler
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

CONFIG = Path(__file__).resolve().parents[2] / "ray_cluster.yaml"
WORLD = {ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")}
TOKEN_FILE = "~/.ray/auth_token"


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load(CONFIG.read_text())


# -- reading the parsed config ------------------------------------------------------------

def strings(value: Any) -> Iterator[str]:
    """Every string anywhere in a parsed YAML value (keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def ray_starts(commands: list[str]) -> list[tuple[dict[str, str], list[str]]]:
    """(environment exported before it, arguments) of each `ray start` in a command list."""
    found = []
    for command in commands:
        env: dict[str, str] = {}
        for part in command.split(";"):
            words = shlex.split(part)
            if words[:1] == ["export"]:
                env.update(word.split("=", 1) for word in words[1:] if "=" in word)
            elif len(words) >= 2 and words[0].endswith("ray") and words[1] == "start":
                found.append((env.copy(), words[2:]))
    return found


def flag(args: list[str], name: str) -> str | None:
    return next((arg.split("=", 1)[1] for arg in args if arg.startswith(f"{name}=")), None)


def world_open(rule: dict[str, Any]) -> bool:
    ranges = [r.get("CidrIp") for r in rule.get("IpRanges", [])] + \
             [r.get("CidrIpv6") for r in rule.get("Ipv6Ranges", [])]
    return any(ipaddress.ip_network(cidr, strict=False) in WORLD for cidr in ranges if cidr)


# -- the checks: each returns what is wrong, empty when the config is right ----------------

def token_auth(config: dict) -> list[str]:
    wrong = []
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = ray_starts(config.get(key, []))
        if not starts:
            wrong.append(f"{key} runs no `ray start`")
        wrong += [f"{key}: `ray start` without RAY_AUTH_MODE=token" for env, _ in starts
                  if env.get("RAY_AUTH_MODE") != "token"]
    if config.get("file_mounts", {}).get(TOKEN_FILE) != TOKEN_FILE:
        wrong.append(f"the token {TOKEN_FILE} is not mounted on the nodes")
    return wrong


def closed_network(config: dict) -> list[str]:
    """No range open to the world anywhere; every node in a group the user made (a group Ray
    makes itself opens SSH to 0.0.0.0/0), the same for head and workers."""
    wrong = [f"world-open range {s!r}" for s in strings(config) if _is_world(s)]
    if "security_group" in config["provider"]:
        wrong.append("provider.security_group lets Ray create a group with SSH open to all")
    groups = {name: node["node_config"].get("SecurityGroupIds")
              for name, node in config["available_node_types"].items()}
    wrong += [f"{name} has no SecurityGroupIds: Ray would make an SSH-open group" for name, ids in groups.items()
              if not ids]
    if len({tuple(ids or ()) for ids in groups.values()}) > 1:
        wrong.append(f"node types in different security groups: {groups}")
    rules = config["provider"].get("security_group", {}).get("IpPermissions", [])
    wrong += [f"ingress rule open to all: {rule}" for rule in rules if world_open(rule)]
    return wrong


def _is_world(text: str) -> bool:
    try:
        return ipaddress.ip_network(text, strict=False) in WORLD
    except ValueError:
        return False


def instance_profiles(config: dict) -> list[str]:
    nodes = config["available_node_types"]
    profiles = {name: node["node_config"].get("IamInstanceProfile") for name, node in nodes.items()}
    wrong = [f"{name} has no IamInstanceProfile" for name, profile in profiles.items() if not profile]
    head = profiles.get(config["head_node_type"])
    if any(profile == head for name, profile in profiles.items() if name != config["head_node_type"]):
        wrong.append("workers share the head's instance profile (its EC2 rights)")
    return wrong


def only_the_wheel(config: dict) -> list[str]:
    """File mounts carry the wheel folder and the token, never the checkout."""
    root = CONFIG.parent
    wrong = []
    for target, source in config.get("file_mounts", {}).items():
        if source == TOKEN_FILE:
            continue
        path = (root / source).resolve()
        if path == root or root.is_relative_to(path) or path != root / "dist":
            wrong.append(f"file_mounts {target}: {source} ships more than the built wheel (dist/)")
    if config.get("file_mounts_sync_continuously"):
        wrong.append("file_mounts_sync_continuously resends files to running nodes")
    return wrong


def installs_the_wheel(config: dict) -> list[str]:
    wheel_dirs = [t for t, s in config.get("file_mounts", {}).items() if s.rstrip("/") in ("./dist", "dist")]
    commands = [shlex.split(c) for c in config.get("setup_commands", [])]
    pip = [c for c in commands if len(c) > 2 and c[0].endswith("pip") and c[1] == "install"]
    wrong = []
    if not any(arg.startswith(f"{d}/") and arg.endswith(".whl") for c in pip for arg in c for d in wheel_dirs):
        wrong.append("setup installs no wheel from the mounted dist/")
    wrong += [f"setup installs a checkout: {shlex.join(c)}" for c in pip if "-e" in c or "--editable" in c]
    return wrong


def dashboard_on_loopback(config: dict) -> list[str]:
    wrong = []
    for _, args in ray_starts(config.get("head_start_ray_commands", [])):
        host = flag(args, "--dashboard-host")
        if host is None or not ipaddress.ip_address(host).is_loopback:
            wrong.append(f"dashboard host {host!r} is not loopback (reach it through `ray dashboard`)")
    return wrong


CHECKS: list[Callable[[dict], list[str]]] = [token_auth, closed_network, instance_profiles, only_the_wheel,
                                            installs_the_wheel, dashboard_on_loopback]


# -- tests ---------------------------------------------------------------------------------

def test_cluster_config_passes_rays_schema_and_validation(config):
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    assert prepared["head_node_type"] in prepared["available_node_types"]
    assert prepared["file_mounts"] == config["file_mounts"]  # Ray's defaults add no mount


def test_validation_would_catch_a_broken_config(config):
    broken = copy.deepcopy(config)
    broken["available_node_types"]["gpu_worker"]["max_workerz"] = 2
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(broken))


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
def test_cluster_config_is_secure(config, check):
    assert check(config) == []


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def mutate(config: dict) -> None:
        *parents, last = path.split(".")
        node = config
        for key in parents:
            node = node[key]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
    return mutate


_DELETE = object()
_WORLD_SSH = [{"FromPort": 22, "ToPort": 22, "IpProtocol": "tcp", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]
_HEAD = "available_node_types.head"
_WORKER = "available_node_types.gpu_worker"
BROKEN = {  # mutation -> the check that must reject it
    "no token on workers": (_set("worker_start_ray_commands",
                                 ["ray stop", "ray start --address=$RAY_HEAD_IP:6379"]), token_auth),
    "token disabled on head": (lambda c: c["head_start_ray_commands"].__setitem__(
        1, c["head_start_ray_commands"][1].replace("RAY_AUTH_MODE=token", "RAY_AUTH_MODE=disabled")), token_auth),
    "token not mounted": (lambda c: c["file_mounts"].pop(TOKEN_FILE), token_auth),
    "Ray-made group": (_set(f"{_WORKER}.node_config.SecurityGroupIds", _DELETE), closed_network),
    "world-open rule": (_set("provider.security_group", {"GroupName": "g", "IpPermissions": _WORLD_SSH}),
                        closed_network),
    "world-open IPv6 anywhere": (_set("provider.note", "::/0"), closed_network),
    "no head profile": (_set(f"{_HEAD}.node_config.IamInstanceProfile", _DELETE), instance_profiles),
    "workers with head rights": (_set(f"{_WORKER}.node_config.IamInstanceProfile", {"Name": "orthotune-ray-head"}),
                                 instance_profiles),
    "checkout mounted": (_set("file_mounts.~/orthotune", "."), only_the_wheel),
    "checkout mounted as ./": (_set("file_mounts.~/orthotune", "./"), only_the_wheel),
    "parent mounted": (_set("file_mounts.~/orthotune", ".."), only_the_wheel),
    "editable install": (lambda c: c["setup_commands"].append("~/venv/bin/pip install -e ~/orthotune"),
                         installs_the_wheel),
    "no wheel install": (lambda c: c.__setitem__("setup_commands", [s for s in c["setup_commands"]
                                                                    if ".whl" not in s]), installs_the_wheel),
    "dashboard on all interfaces": (lambda c: c["head_start_ray_commands"].__setitem__(
        1, c["head_start_ray_commands"][1].replace("--dashboard-host=127.0.0.1", "--dashboard-host=0.0.0.0")),
        dashboard_on_loopback),
    "dashboard host unset": (lambda c: c["head_start_ray_commands"].__setitem__(
        1, c["head_start_ray_commands"][1].replace("--dashboard-host=127.0.0.1", "")), dashboard_on_loopback),
}


@pytest.mark.parametrize("name", BROKEN)
def test_each_check_rejects_a_config_broken_its_way(config, name):
    mutate, check = BROKEN[name]
    broken = copy.deepcopy(config)
    mutate(broken)
    assert check(broken), f"{check.__name__} accepted a config with: {name}"


def test_a_group_ray_makes_itself_opens_ssh_to_the_world():
    """Why the config names a group the user made: Ray 2.60's AWS provider opens SSH to
    0.0.0.0/0 in a group it creates (read from its source: the module needs boto3)."""
    source = Path(ray.autoscaler.__file__).parent / "_private" / "aws" / "config.py"
    tree = ast.parse(source.read_text())
    function = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                    and node.name == "_create_default_ssh_inbound_rules")
    returned = next(node for node in ast.walk(function) if isinstance(node, ast.Return))
    rules = ast.literal_eval(returned.value)
    assert any(rule["FromPort"] == 22 and world_open(rule) for rule in rules)


def test_every_command_is_whole_shell(config):
    """A ' #' in a plain YAML string starts a comment: a command cut there leaves a quote open."""
    keys = [k for k in config if k.endswith("_commands")]
    assert "setup_commands" in keys and "head_start_ray_commands" in keys
    for key in keys:
        for command in config[key]:
            shlex.split(command)  # raises on an unclosed quote
    with pytest.raises(ValueError):
        shlex.split(yaml.safe_load("- echo 'a # b' >> f")[0])


def test_head_runs_no_trials_and_workers_have_gpus(config):
    nodes = config["available_node_types"]
    assert nodes[config["head_node_type"]]["resources"]["CPU"] == 0
    assert nodes["gpu_worker"]["resources"]["GPU"] >= 1


def test_setup_pins_torch_and_gives_the_autoscaler_boto3(config):
    prepared = prepare_config(copy.deepcopy(config))
    assert any("torch==2.13.0" in c for c in prepared["setup_commands"])
    # Ray's defaults would install boto3 with the system pip, outside the venv Ray runs in
    assert any(c.startswith("~/venv/bin/pip") and "boto3" in c for c in prepared["head_setup_commands"])
