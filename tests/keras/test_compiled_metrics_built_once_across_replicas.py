"""The compiled metrics are built by the first replica to reach them, under a lock; the others test
``_metrics`` without it. It was published before the weighted metrics and their names, so a replica that came
late in that window read ``_weighted`` as None ("'NoneType' object is not subscriptable", seen in CI on a
two-output model with ``weighted_metrics``). Here the weighted metrics' build is slowed and replica 1 comes late."""

from __future__ import annotations

from tests.conftest import run_fresh


def test_a_replica_arriving_while_the_metrics_are_built_waits_for_all_of_them():
    out = run_fresh("""
        import time, numpy as np, multidev as md
        from multidev.keras.models import compile_utils
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
        get = compile_utils.metrics_mod.get

        def slow_get(spec, *args, **kwargs):
            if spec == "mae":          # the weighted one: built after the plain metrics
                time.sleep(0.3)
            return get(spec, *args, **kwargs)

        compile_utils.metrics_mod.get = slow_get
        update = compile_utils.MetricsContainer.update_state

        def replica_1_late(self, *args, **kwargs):   # arrives while replica 0 builds the weighted metrics
            if md.distribute.get_replica_context().replica_id_in_sync_group == 1:
                time.sleep(0.1)
            return update(self, *args, **kwargs)

        compile_utils.MetricsContainer.update_state = replica_1_late
        strategy = md.distribute.MirroredStrategy()
        with strategy.scope():
            model = md.keras.Sequential([md.keras.Input((3,)), md.keras.layers.Dense(1)])
            model.compile("sgd", "mse", metrics=["mse"], weighted_metrics=["mae"])
        x, y = np.ones((8, 3), "float32"), np.zeros((8, 1), "float32")
        history = model.fit(x, y, sample_weight=np.ones(8, "float32"), batch_size=8, epochs=1, verbose=0)
        print(sorted(history.history))
        """)
    assert out.stdout.strip().splitlines()[-1] == "['loss', 'mae', 'mse']", out.stdout
