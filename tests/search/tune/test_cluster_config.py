"""ray_cluster.yaml checked offline with Ray's own cluster-config schema and validation."""

import copy
from pathlib import Path

import jsonschema
import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

CONFIG = Path(__file__).resolve().parents[3] / "ray_cluster.yaml"


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load(CONFIG.read_text())


def test_cluster_config_passes_rays_schema_and_validation(config):
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    assert prepared["head_node_type"] in prepared["available_node_types"]


def test_validation_would_catch_a_broken_config(config):
    broken = copy.deepcopy(config)
    broken["available_node_types"]["gpu_worker"]["max_workerz"] = 2
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(broken))


def test_head_runs_no_trials_and_workers_have_gpus(config):
    nodes = config["available_node_types"]
    assert nodes[config["head_node_type"]]["resources"]["CPU"] == 0
    assert nodes["gpu_worker"]["resources"]["GPU"] >= 1


def test_setup_installs_orthotune_with_pinned_torch(config):
    commands = "\n".join(config["setup_commands"])
    assert "torch==2.13.0" in commands and "-e ~/orthotune" in commands
    assert config["file_mounts"] == {"~/orthotune": "."}


def test_dashboard_and_client_stay_on_localhost(config):
    head = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head
    assert "0.0.0.0" not in CONFIG.read_text()
