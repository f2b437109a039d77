"""The GPU paths the GPU check (``benchmarks/gpu_check.sh``, issue 28) runs on a real GPU: memory
growth, memory statistics, the placement log, soft placement of a CPU-only op, mixed precision
``fit``, CentralStorageStrategy on GPUs and no host-device sync in a ``fit`` step. Skipped without
CUDA; each group runs in one fresh interpreter (device configuration is per process)."""

import pytest

pytestmark = pytest.mark.gpu


def test_memory_growth_statistics_and_the_placement_log(fresh):
    out = fresh(
        """
        import torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.experimental.set_memory_growth(gpu, True)
        assert md.config.experimental.get_memory_growth(gpu) is True
        md.debugging.set_log_device_placement(True)
        with md.device("/GPU:0"):
            a = torch.ones(256, 256)
            b = torch.matmul(a, a)
        assert b.device.type == "cuda" and float(b[0, 0]) == 256.0
        info = md.config.experimental.get_memory_info("GPU:0")
        assert info["current"] >= 2 * 256 * 256 * 4 and info["peak"] >= info["current"], info
        del a, b
        md.config.experimental.reset_memory_stats("GPU:0")
        after = md.config.experimental.get_memory_info("GPU:0")
        assert after["peak"] == after["current"] < info["peak"], (info, after)
        try:
            md.config.experimental.set_memory_growth(gpu, False)
        except RuntimeError as err:
            assert "cannot be modified after being initialized" in str(err)
        else:
            raise SystemExit("memory growth changed after initialization")
        print("OK")
        """
    )
    assert "OK" in out.stdout
    assert "Executing op matmul in device /job:localhost/replica:0/task:0/device:GPU:0" in out.stderr, out.stderr


def test_soft_placement_runs_a_cpu_only_op_from_a_gpu_scope(fresh):
    out = fresh(
        """
        import torch, multidev as md
        md.config.set_soft_device_placement(True)
        x = torch.tensor([0.5, 1.5, 1.5, 2.5])
        with md.device("/GPU:0"):
            hist = torch.histogram(x, bins=3, range=(0.0, 3.0))   # torch has no CUDA kernel for histogram
        assert hist.hist.tolist() == [1.0, 2.0, 1.0], hist
        print("OK", hist.hist.device)
        """
    )
    assert "OK" in out.stdout


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_fit_on_two_logical_gpus(fresh, policy):
    out = fresh(
        f"""
        import numpy as np, torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        md.keras.mixed_precision.set_global_policy("{policy}")
        strategy = md.distribute.MirroredStrategy()
        with strategy.scope():
            model = md.keras.Sequential([md.keras.layers.Dense(64, activation="relu", input_shape=(16,)),
                                         md.keras.layers.Dense(4, dtype="float32")])
            model.compile(optimizer=md.keras.optimizers.Adam(1e-2),
                          loss=md.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        rng = np.random.default_rng(0)
        x = rng.normal(size=(512, 16)).astype("float32"); y = (x[:, 0] > 0).astype("int64") + 2 * (x[:, 1] > 0)
        history = model.fit(x, y, batch_size=64, epochs=4, verbose=0)
        losses = history.history["loss"]
        assert losses[-1] < losses[0] and np.isfinite(losses).all(), losses
        assert model.layers[0].kernel.dtype == torch.float32          # float32 weights, low-precision compute
        print("OK", losses)
        """
    )
    assert "OK" in out.stdout


def test_central_storage_with_gpu_compute_devices_trains_as_one_device(fresh):
    out = fresh(
        """
        import torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        strategy = md.distribute.experimental.CentralStorageStrategy()
        assert strategy.num_replicas_in_sync == 2
        torch.manual_seed(0)
        with strategy.scope():
            model = torch.nn.Linear(8, 1, dtype=torch.float64)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(0)
        ref = torch.nn.Linear(8, 1, dtype=torch.float64).cuda()
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        x = torch.randn(16, 8, dtype=torch.float64); y = torch.randn(16, 1, dtype=torch.float64)
        data = strategy.experimental_distribute_dataset(md.data.Dataset.from_tensor_slices((x, y)).batch(16))
        def step(xb, yb):
            opt.zero_grad()
            md.nn.compute_average_loss(((model(xb) - yb) ** 2).sum(1), global_batch_size=16).backward()
            opt.step()
        for xb, yb in data:
            strategy.run(step, args=(xb, yb))
        ref_opt.zero_grad(); ((ref(x.cuda()) - y.cuda()) ** 2).sum(1).mean().backward(); ref_opt.step()
        for p, e in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.detach().cpu(), e.detach().cpu(), rtol=1e-12, atol=1e-12)
        print("OK", [str(p.device) for p in model.parameters()])
        """
    )
    assert "OK" in out.stdout


def test_a_fit_step_does_not_synchronize_host_and_device(fresh):
    out = fresh(
        """
        import warnings, numpy as np, torch, multidev as md
        strategy = md.distribute.MirroredStrategy()
        with strategy.scope():
            model = md.keras.Sequential([md.keras.layers.Dense(32, activation="relu", input_shape=(8,)),
                                         md.keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        x = np.random.default_rng(0).normal(size=(256, 8)).astype("float32"); y = x[:, :1] * 2
        model.fit(x, y, batch_size=32, epochs=1, verbose=0)               # warm-up: build, allocate
        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(x, y, batch_size=32, epochs=1, verbose=0)            # 8 steps
        torch.cuda.set_sync_debug_mode(0)
        syncs = [str(w.message) for w in caught if "synchroniz" in str(w.message)]
        print("SYNCS", len(syncs))
        assert len(syncs) < 8, syncs[:3]                                     # none per step; the epoch's end may read
        print("OK")
        """
    )
    assert "OK" in out.stdout


def test_a_keras_model_made_in_a_gpu_scope_takes_numpy_and_fits_as_on_the_cpu(fresh):
    out = fresh(
        """
        import warnings
        import numpy as np, torch, multidev as md

        def made():
            model = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(8, activation="relu"),
                                         md.keras.layers.Dense(1)])
            model.set_weights([np.sin(np.arange(w.size) + i).reshape(w.shape).astype("float32")
                               for i, w in enumerate(model.get_weights())])
            model.compile(md.keras.optimizers.SGD(0.05), "mse")
            return model

        rng = np.random.RandomState(0)
        x, y = rng.randn(32, 4).astype("float32"), rng.randn(32, 1).astype("float32")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            on_cpu = made()
            on_cpu.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        assert any("fit runs on the CPU" in str(w.message) for w in caught), [str(w.message) for w in caught]
        with md.device("/GPU:0"):
            on_gpu = made()
        assert on_gpu.layers[0].kernel.device.type == "cuda"
        assert on_gpu(x).device.type == "cuda"                 # numpy in, copied to the weights' device
        on_gpu.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        for a, b in zip(on_cpu.get_weights(), on_gpu.get_weights()):
            assert np.allclose(a, b, atol=1e-5), np.abs(a - b).max()
        print("OK")
        """
    )
    assert "OK" in out.stdout
