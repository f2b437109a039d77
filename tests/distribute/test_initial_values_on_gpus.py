"""A module made in a strategy's scope on GPUs draws its initial weights from the host's generator, as the same
module made on the CPU and moved does (``Net().to(rank)`` under DDP, and its one-device run). On an H200 the
initialiser ran on the GPU copy and drew from the CUDA generator: after ``torch.manual_seed(0)`` the replicas'
weights were not the one-device program's (0.42 off after one step, issue 28). Here the GPUs are stand-ins on
torch's ``meta`` device, which draws nothing: the host generator must advance as for the CPU module, and the GPU
test (``test_gpu_strategies.py``) compares the weights themselves."""

from __future__ import annotations

from tests.conftest import run_fresh
from tests.devices.fake_gpus import fake_gpus


def test_initialisers_in_scope_on_gpus_draw_from_the_host_generator():
    out = run_fresh(fake_gpus(1, """
        import torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        strategy = md.distribute.MirroredStrategy()

        def build():
            net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Conv1d(2, 3, 3), torch.nn.Embedding(5, 4))
            torch.nn.init.orthogonal_(net[0].weight)          # a program's own initialisers after construction
            with torch.no_grad():
                net[2].weight.normal_(0.0, 0.02)
            torch.nn.init.trunc_normal_(net[1].weight, std=0.02)
            return net

        torch.manual_seed(0)
        build()
        expected = torch.get_rng_state()
        torch.manual_seed(0)
        with strategy.scope():
            model = build()
        assert {str(c.device) for p in model.parameters() for c in p.values} == {"meta"}
        assert torch.equal(torch.get_rng_state(), expected), "the initialisers did not draw from the host generator"
        print("OK")
        """, torch_device="meta"))
    assert "OK" in out.stdout
