"""A training step on GPU replicas neither reads numbers back nor copies host data to the device after its first.

On the launch-bound H200 workloads (issue 28) each such copy waited for the device: md.keras ``fit`` on two
logical GPUs merged every metric into host memory and cloned each replica's fresh metric state from host memory
each step, read each gradient bucket's presence flags back, read each Dropout's row count as a GPU scalar, and its
optimizers read the learning rate, step counts and Nadam's product from GPU scalars. Here the GPUs are stand-ins
on torch's ``meta`` device (``tests.devices.fake_gpus.meta_replicas``): a read back raises, and copies of host data
to the device are counted by call site. The GPU check's ``set_sync_debug_mode`` tests cover the same on a GPU.
"""

from __future__ import annotations

from tests.conftest import run_fresh
from tests.devices.fake_gpus import meta_replicas

def test_keras_fit_steps_on_two_logical_gpus_and_on_one():
    out = run_fresh(meta_replicas("""
        import torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        strategy = md.distribute.MirroredStrategy()
        x, y = torch.ones(4, 4, device="meta"), torch.zeros(4, dtype=torch.int64, device="meta")
        for scope in (strategy.scope, lambda: md.device("/GPU:0")):
            for optimizer in ("adam", "nadam", md.keras.optimizers.SGD(0.1, momentum=0.9)):
                with scope():
                    model = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(8, activation="relu"),
                                                 md.keras.layers.Dropout(0.1), md.keras.layers.Dense(3)])
                model.compile(optimizer, md.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                              metrics=["accuracy", md.keras.metrics.SparseTopKCategoricalAccuracy(2)])
                train = model.make_train_function()
                for i in range(4):
                    WATCH[0] = i >= 2        # after the first steps (states made, first-run checks)
                    logs = train((x, y))
                WATCH[0] = False
                assert set(logs) == {"loss", "accuracy", "sparse_top_k_categorical_accuracy"}, logs
                tracker = model.metrics[0].result()   # on the device now: `.numpy()` must read it back
                assert (tracker.device.type, type(tracker).__name__) == ("meta", "EagerTensor"), tracker
        assert not HOST_TRAFFIC, dict(HOST_TRAFFIC)
        print("OK")
        """))
    assert "OK" in out.stdout, out.stdout


def test_a_custom_loop_step_with_torch_optimizers_on_two_logical_gpus():
    out = run_fresh(meta_replicas("""
        import torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        strategy = md.distribute.MirroredStrategy()
        optimizers = [lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), lambda p: torch.optim.AdamW(p, lr=1e-3),
                      lambda p: torch.optim.Adam(p, lr=1e-3, foreach=False)]
        x = md.distribute.PerReplica([torch.ones(4, 4, device="meta")] * 2)
        y = md.distribute.PerReplica([torch.zeros(4, dtype=torch.int64, device="meta")] * 2)
        loss_fn = torch.nn.CrossEntropyLoss(reduction="none")
        for make in optimizers:
            with strategy.scope():
                net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                          torch.nn.Linear(8, 3))
                opt = make(net.parameters())

            def step(x, y):
                opt.zero_grad()
                loss = md.nn.compute_average_loss(loss_fn(net(x), y), global_batch_size=8)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
                return loss

            for i in range(4):
                WATCH[0] = i >= 2
                strategy.run(step, args=(x, y))
            WATCH[0] = False
        assert not HOST_TRAFFIC, dict(HOST_TRAFFIC)
        print("OK")
        """))
    assert "OK" in out.stdout, out.stdout


def test_mixed_precision_fit_steps_read_only_the_loss_scales_finite_check():
    """mixed_float16's dynamic loss scale decides on the host whether to apply the step: one read a step, as torch's
    GradScaler's ``step`` makes (TensorFlow decides on the device); stubbed here, everything else is watched."""
    out = run_fresh(meta_replicas("""
        import torch, multidev as md
        from multidev.keras.mixed_precision import loss_scale_optimizer
        checks = []
        loss_scale_optimizer.LossScaleOptimizer._all_finite = staticmethod(
            lambda grads, already_consistent: checks.append(1) or True)
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        x, y = torch.ones(4, 4, device="meta"), torch.zeros(4, dtype=torch.int64, device="meta")
        for make in (lambda: md.distribute.OneDeviceStrategy("/GPU:0"), md.distribute.MirroredStrategy):
            for policy in ("mixed_float16", "mixed_bfloat16"):
                md.keras.mixed_precision.set_global_policy(policy)
                with make().scope():
                    model = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(8, activation="relu"),
                                                 md.keras.layers.Dense(3, dtype="float32")])
                    model.compile("adam", md.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                                  metrics=["accuracy"])
                train = model.make_train_function()
                for i in range(4):
                    WATCH[0] = i >= 2
                    train((x, y))
                WATCH[0] = False
        assert not HOST_TRAFFIC, dict(HOST_TRAFFIC)
        assert len(checks) == 4 + 4 * 2, len(checks)   # mixed_float16: once a step on one device, per replica on two
        print("OK")
        """))
    assert "OK" in out.stdout, out.stdout


def test_central_storage_multi_worker_and_a_distributed_dataset_loop_on_two_logical_gpus():
    out = run_fresh(meta_replicas("""
        import torch, multidev as md
        _equal = torch.equal                       # the symbolic build's state check compares values: none on meta
        torch.equal = lambda a, b: True if a.device.type == "meta" else _equal(a, b)
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        L = md.keras.layers
        x, y = torch.ones(4, 4, device="meta"), torch.zeros(4, dtype=torch.int64, device="meta")
        for make in (md.distribute.experimental.CentralStorageStrategy, md.distribute.MultiWorkerMirroredStrategy):
            strategy = make()
            with strategy.scope():
                model = md.keras.Sequential([md.keras.Input((4,)), L.Dense(8), L.BatchNormalization(), L.Dense(3)])
                model.compile("adam", md.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                              metrics=["accuracy"])
                optimizer = md.keras.optimizers.SGD(0.1)
            train = model.make_train_function()
            for i in range(4):
                WATCH[0] = i >= 2
                train((x, y))
            WATCH[0] = False

            def step(inputs):
                xb, yb = inputs
                with md.GradientTape() as tape:
                    loss = md.nn.compute_average_loss(md.keras.losses.sparse_categorical_crossentropy(
                        yb, model(xb, training=True), from_logits=True), global_batch_size=4)
                optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
                return loss

            dataset = md.data.Dataset.from_tensor_slices((torch.ones(16, 4), torch.zeros(16, dtype=torch.int64)))
            for i, batch in enumerate(strategy.experimental_distribute_dataset(dataset.batch(4))):
                WATCH[0] = i >= 2
                strategy.reduce("SUM", strategy.run(step, args=(batch,)), axis=None)
            WATCH[0] = False
        assert not HOST_TRAFFIC, dict(HOST_TRAFFIC)
        print("OK")
        """))
    assert "OK" in out.stdout, out.stdout


def test_fit_over_arrays_already_on_the_gpu_copies_only_an_epochs_shuffled_order():
    out = run_fresh(meta_replicas("""
        import torch, multidev as md
        from multidev.keras.models import trainer
        trainer._floats = lambda logs: {k: 0.0 for k in logs}     # an epoch's logs are read once: no data on meta
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        x, y = torch.ones((40, 4), device="meta"), torch.zeros(40, dtype=torch.int64, device="meta")
        for scope in (md.distribute.MirroredStrategy().scope, lambda: md.device("/GPU:0")):
            with scope():
                model = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(3)])
            model.compile("adam", md.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
            for shuffle in (True, "batch", False):
                model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=shuffle)
                HOST_TRAFFIC.clear()
                WATCH[0] = True
                model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=shuffle)   # 10 steps
                WATCH[0] = False
                assert sum(HOST_TRAFFIC.values()) <= 3, (shuffle, dict(HOST_TRAFFIC))   # the order once, 2 metric resets
                assert not any("index" in s for s in HOST_TRAFFIC), (shuffle, dict(HOST_TRAFFIC))
        print("OK")
        """))
    assert "OK" in out.stdout, out.stdout


def test_predict_reads_the_outputs_back_once_at_the_end():
    """As Keras 3 (and TensorFlow): every batch's outputs stay on the device until all batches ran (on the
    stand-in GPUs the one read at the end raises, after the last batch)."""
    out = run_fresh(meta_replicas("""
        import torch, multidev as md
        gpu = md.config.list_physical_devices("GPU")[0]
        md.config.set_logical_device_configuration(gpu, [md.config.LogicalDeviceConfiguration(memory_limit=2048)] * 2)
        strategy = md.distribute.MirroredStrategy()
        x = torch.ones(12, 4, device="meta")
        for scope in (strategy.scope, lambda: md.device("/GPU:0")):
            with scope():
                model = md.keras.Sequential([md.keras.Input((4,)), md.keras.layers.Dense(8, activation="relu"),
                                             md.keras.layers.Dense(3)])
            ends = []

            class Batches(md.keras.callbacks.Callback):
                def on_predict_batch_end(self, batch, logs=None):
                    ends.append(batch)
                    WATCH[0] = True      # from the second batch on

            try:
                model.predict(x, batch_size=4, verbose=0, callbacks=[Batches()])
            except NotImplementedError as err:
                assert "meta tensor" in str(err), err
            WATCH[0] = False
            assert ends == [0, 1, 2], ends
        assert not HOST_TRAFFIC, dict(HOST_TRAFFIC)
        print("OK")
        """))
    assert "OK" in out.stdout, out.stdout
