"""A checkpoint saved from a DDP-wrapped model (``module.``-prefixed keys) loaded into its multidev port
(``multidev/distribute/state_dict_prefix.py``). On the old code ``load_state_dict(..., strict=False)``
matched no key and loaded nothing: the port trained on from its fresh initialisation, where the DDP program
went on from the checkpoint. The programs as DDP runs them are in ``tests/programs/resume_programs.py``."""

from __future__ import annotations

import collections

import pytest
import torch
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present

import multidev as md


def _model():
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


@pytest.fixture()
def port():
    """A model built in a strategy's scope, and a checkpoint of another as DDP's state_dict names it."""
    strategy = md.distribute.MirroredStrategy()
    torch.manual_seed(0)
    with strategy.scope():
        model = _model()
    saved = _model()
    ddp_keys = collections.OrderedDict(("module." + k, v) for k, v in saved.state_dict().items())
    return strategy, model, saved, ddp_keys


def _unchanged(model, before) -> bool:
    return all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_strict_false_with_ddp_prefixed_keys_is_refused_and_loads_nothing(port):
    _, model, _, ddp_keys = port
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"(?s)would load nothing.*'module\.0\.weight'.*"
                                         r"consume_prefix_in_state_dict_if_present"):
        model.load_state_dict(ddp_keys, strict=False)
    assert _unchanged(model, before)
    head_dropped = {k: v for k, v in ddp_keys.items() if not k.startswith("module.2.")}   # a new head
    with pytest.raises(ValueError, match="2 key"):
        model.load_state_dict(head_dropped, strict=False)
    assert _unchanged(model, before)


def test_strict_load_keeps_torchs_error_with_the_hint(port):
    _, model, _, ddp_keys = port
    with pytest.raises(RuntimeError, match=r"(?s)Unexpected key\(s\).*DistributedDataParallel's 'module\.' prefix"):
        model.load_state_dict(ddp_keys)


def test_the_ports_of_the_prefix_load_as_ddp_does(port):
    strategy, model, saved, ddp_keys = port
    stripped = dict(ddp_keys)
    consume_prefix_in_state_dict_if_present(stripped, "module.")
    assert model.load_state_dict(stripped).missing_keys == []
    assert all(torch.equal(v, saved.state_dict()[k]) for k, v in model.state_dict().items())
    renamed = {k.replace("module.", ""): v * 2 for k, v in ddp_keys.items()}         # the other common idiom
    result = model.load_state_dict(renamed, strict=False)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert all(torch.equal(c, 2 * saved[0].weight) for c in strategy.experimental_local_results(model[0].weight))


def test_loads_that_match_a_key_are_torchs(port):
    """A partial load that matches something, an empty dict, and a model with its own ``module`` child."""
    _, model, _, ddp_keys = port
    partial = {"0.weight": torch.ones(4, 3), "extra.weight": torch.ones(1)}
    result = model.load_state_dict(partial, strict=False)
    assert result.unexpected_keys == ["extra.weight"] and "2.bias" in result.missing_keys
    assert model.load_state_dict({}, strict=False).unexpected_keys == []

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.module = _model()
    strategy = md.distribute.MirroredStrategy()
    with strategy.scope():
        wrapper = Wrapper()
    assert wrapper.load_state_dict(ddp_keys).missing_keys == []


def test_a_plain_module_without_a_strategy_is_torchs():
    """Without a live strategy torch's ``load_state_dict`` is untouched (returns the unmatched keys)."""
    import gc
    gc.collect()
    model = _model()
    ddp_keys = {"module." + k: v for k, v in _model().state_dict().items()}
    if getattr(torch.nn.Module.load_state_dict, "_multidev_wrapped", False):
        pytest.skip("a strategy of another test is still alive in this process")
    assert len(model.load_state_dict(ddp_keys, strict=False).missing_keys) == 4
