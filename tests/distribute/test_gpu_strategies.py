"""GPU paths of the strategies (skipped without a CUDA GPU): logical GPUs, streams, invariant."""

import pytest

pytestmark = pytest.mark.gpu


def test_mirrored_on_two_logical_gpus_matches_one_device(fresh):
    out = fresh(
        """
        import torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        strategy = md.distribute.MirroredStrategy()
        assert strategy.num_replicas_in_sync == 2
        assert isinstance(strategy.extended._cross_device_ops, md.distribute.ReductionToOneDevice)
        torch.manual_seed(0)
        with strategy.scope():
            model = torch.nn.Linear(8, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(0)
        ref = torch.nn.Linear(8, 1).cuda()
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        x = torch.randn(16, 8, device="cuda"); y = torch.randn(16, 1, device="cuda")
        dist = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x.cpu(), y.cpu())).batch(16))
        streams = []
        def step(xb, yb):
            streams.append(torch.cuda.current_stream().cuda_stream)
            opt.zero_grad()
            md.nn.compute_average_loss(((model(xb) - yb) ** 2).sum(1), global_batch_size=16).backward()
            opt.step()
        for xb, yb in dist:
            strategy.run(step, args=(xb, yb))
        ref_opt.zero_grad(); ((ref(x) - y) ** 2).sum(1).mean().backward(); ref_opt.step()
        assert len(set(streams)) == 2, streams
        for p, e in zip(model.parameters(), ref.parameters()):
            for c in p.values:
                torch.testing.assert_close(c.detach(), e.detach(), rtol=1e-5, atol=1e-6)
        print("OK")
        """
    )
    assert "OK" in out.stdout


def test_a_custom_loop_step_on_two_logical_gpus_does_not_synchronize_host_and_device(fresh):
    """torch.optim's step counters stay on the host, as torch keeps them: the replica's device scope put them on
    the GPU, and each AdamW step read each one back (111 host-device syncs a step on an H200, issue 28)."""
    out = fresh(
        """
        import warnings, torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        strategy = md.distribute.MirroredStrategy()
        with strategy.scope():
            model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        xs = [torch.randn(8, 16, device="cuda") for _ in range(2)]
        ys = [torch.randint(0, 4, (8,), device="cuda") for _ in range(2)]
        x = strategy.experimental_distribute_values_from_function(lambda ctx: xs[ctx.replica_id_in_sync_group])
        y = strategy.experimental_distribute_values_from_function(lambda ctx: ys[ctx.replica_id_in_sync_group])
        def step(xb, yb):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        for _ in range(2):                                                  # warm-up: state, twins, buckets
            strategy.run(step, args=(x, y))
        counters = [s["step"].device.type for s in opt.state.values()]
        assert set(counters) == {"cpu"}, counters
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                strategy.run(step, args=(x, y))
        torch.cuda.set_sync_debug_mode(0)
        syncs = [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if "synchroniz" in str(w.message)]
        assert len(syncs) < 3, syncs[:5]                                    # none per step
        print("OK")
        """
    )
    assert "OK" in out.stdout


def test_a_module_made_in_scope_on_logical_gpus_starts_from_the_cpu_modules_weights(fresh):
    """``torch.manual_seed(0)`` then a module in the scope: the weights a CPU-built module gets (DDP's
    ``Net().to(rank)``), not draws from the CUDA generator (0.42 off after one step on an H200, issue 28)."""
    out = fresh(
        """
        import torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        strategy = md.distribute.MirroredStrategy()
        def build():
            net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Conv1d(2, 3, 3), torch.nn.Embedding(5, 4))
            torch.nn.init.orthogonal_(net[0].weight)
            return net
        torch.manual_seed(0)
        with strategy.scope():
            model = build()
        torch.manual_seed(0)
        ref = build()
        for (name, p), e in zip(model.named_parameters(), ref.parameters()):
            for c in p.values:
                assert c.device.type == "cuda", (name, c.device)
                torch.testing.assert_close(c.detach().cpu(), e.detach(), rtol=0, atol=0, msg=name)
        print("OK")
        """
    )
    assert "OK" in out.stdout
