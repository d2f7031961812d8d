"""A user's treatment (config ``treatment``, issue 50): checked when the config is made, applied to
the built model before the Ortho-GConv arm, and a failing one fails its run with the reason. The
worked example of docs/your-model-and-data.md (PyG's PairNorm after each convolution) is run from
the page itself."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from torch_geometric.nn import MessagePassing

from orthotune.core import ConfigError, TrainConfig, treatment_function
from orthotune.models import NodeModule, TreatmentFailed, build_module_model, orthogonalised_weights
from orthotune.training import run_configs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # treatments_for_tests, as a user's package on the path
DOCS = HERE.parents[1] / "docs" / "your-model-and-data.md"
FEATURES, CLASSES = 1433, 7


def config(**values) -> TrainConfig:
    base = dict(dataset="cora", setting="semi", backbone="gat", ortho=False, depth=2, hidden=16, heads=2,
                epochs=3, patience=3, seeds=(0,))
    return TrainConfig(**{**base, **values})


@pytest.fixture(scope="module")
def docs_example(tmp_path_factory):
    """The page's ``pairnorm_treatment.py``, saved as the page says, on the path."""
    found = re.search(r"<!-- example: pairnorm_treatment.py -->\n```python\n(.*?)```", DOCS.read_text(), re.S)
    assert found, "the worked example is gone from docs/your-model-and-data.md"
    folder = tmp_path_factory.mktemp("user")
    (folder / "pairnorm_treatment.py").write_text(found.group(1))
    sys.path.insert(0, str(folder))
    yield "pairnorm_treatment:pairnorm"
    sys.path.remove(str(folder))


@pytest.mark.parametrize(("reference", "message"), [
    ("pairnorm", "treatment='pairnorm' must be package.module:function"),
    ("a.b:c d", "must be package.module:function"),
])
def test_a_malformed_treatment_is_one_line_when_the_config_is_made(reference, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as error:
        config(treatment=reference)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(("reference", "message"), [
    ("no_such_module_for_tests:f", "cannot import no_such_module_for_tests: ModuleNotFoundError"),
    ("treatments_for_tests:absent", "treatments_for_tests has no callable 'absent'"),
])
def test_an_unknown_treatment_is_one_line_where_it_is_resolved(reference, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as error:
        treatment_function(reference)
    assert "\n" not in str(error.value)


def test_a_stored_config_whose_treatment_module_is_gone_still_reads_and_its_run_fails_with_the_reason():
    """A store outlives the user's module: its rows read back (``best``, reports), and only
    training such a config fails, as its run's failure."""
    gone = config(treatment="no_such_module_for_tests:pairnorm")
    assert TrainConfig.from_dict(gone.to_dict()).treatment == "no_such_module_for_tests:pairnorm"
    with pytest.raises(TreatmentFailed, match="cannot import no_such_module_for_tests"):
        build_module_model(gone, FEATURES, CLASSES, seed=0)


def test_backbones_that_cannot_take_a_treatment_refuse_it():
    with pytest.raises(ConfigError, match="treatment='treatments_for_tests:wrapped' does not apply to gcn"):
        config(backbone="gcn", treatment="treatments_for_tests:wrapped")
    with pytest.raises(ConfigError, match="does not apply to mlp"):
        config(backbone="mlp", treatment="treatments_for_tests:wrapped")
    assert config().treatment == ""  # none by default


@pytest.mark.slow
def test_the_docs_pairnorm_example_normalises_every_convolution_and_trains(docs_example, data_root):
    treated = build_module_model(config(treatment=docs_example), FEATURES, CLASSES, seed=0)
    plain = build_module_model(config(), FEATURES, CLASSES, seed=0)
    convolutions = [m for m in treated.modules() if isinstance(m, MessagePassing)]
    outputs = []
    for convolution in convolutions:  # a later hook sees what PairNorm's hook returned
        convolution.register_forward_hook(lambda _m, _i, out: outputs.append(out))
    x, edge_index = torch.rand(30, FEATURES), torch.randint(0, 30, (2, 90))
    treated.eval(), plain.eval()
    with torch.no_grad():
        changed = not torch.allclose(treated(x, edge_index), plain(x, edge_index))
    assert changed and len(outputs) == len(convolutions) == 2
    for out in outputs:  # PairNorm centres each convolution's output over the nodes
        assert torch.allclose(out.mean(dim=0), torch.zeros(out.shape[1]), atol=1e-5)
    (result,) = run_configs([config(treatment=docs_example)], torch.device("cpu"))
    (baseline,) = run_configs([config()], torch.device("cpu"))
    assert result.status == "completed" and result.runs[0].val_loss != baseline.runs[0].val_loss


def test_a_new_module_around_the_model_keeps_its_layers_and_its_ortho_arm():
    plain = build_module_model(config(), FEATURES, CLASSES, seed=0)
    model = build_module_model(config(treatment="treatments_for_tests:wrapped"), FEATURES, CLASSES, seed=0)
    assert isinstance(model, NodeModule) and model.output_layer is not None
    assert [p.shape for p in model.input_parameters()] == [p.shape for p in plain.input_parameters()]
    x, edge_index = torch.rand(12, FEATURES), torch.randint(0, 12, (2, 30))
    model.eval(), plain.eval()
    with torch.no_grad():
        assert torch.allclose(model(x, edge_index), plain(x, edge_index) / 2)
    ortho = build_module_model(config(ortho=True, treatment="treatments_for_tests:wrapped"), FEATURES, CLASSES, 0)
    assert list(orthogonalised_weights(ortho))  # orthogonalise ran on the treated model


@pytest.mark.parametrize(("name", "reason"), [
    ("raising", "treatment 'treatments_for_tests:raising' failed: ValueError: no treatment for gat"),
    ("not_a_module", "treatment 'treatments_for_tests:not_a_module' returned str, not a torch.nn.Module"),
])
def test_a_treatment_that_raises_or_returns_no_module_fails_the_run_with_its_reason(name, reason):
    with pytest.raises(TreatmentFailed, match=re.escape(reason)):
        build_module_model(config(treatment=f"treatments_for_tests:{name}"), FEATURES, CLASSES, seed=0)
