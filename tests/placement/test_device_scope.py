"""md.device scopes: placement, nesting, unknown devices, threads (fresh interpreters)."""

PREFIX = "/job:localhost/replica:0/task:0/device:"


def test_placement_log_reaches_stderr_without_logging_setup(fresh):
    proc = fresh(
        """
        import logging, sys, torch
        import multidev as md
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
        md.debugging.set_log_device_placement(True)
        assert md.debugging.get_log_device_placement() is True
        a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        with md.device("/CPU:1"):
            b = torch.ones(3, 2)
            c = torch.matmul(a, b)
        print("phase 2", file=sys.stderr, flush=True)
        logging.basicConfig(level=logging.INFO)  # the user configures logging: still printed once
        d = c * 2
        print("phase 3", file=sys.stderr, flush=True)
        md.debugging.set_log_device_placement(False)
        e = d + 1
        with md.device("/CPU:1"):
            f = e - 1
        assert torch.equal(f, d) and d.tolist() == [[12.0, 12.0], [30.0, 30.0]]
        """
    )
    first, second, third = proc.stderr.split("phase 2\n")[0], *proc.stderr.split("phase 2\n")[1].split("phase 3\n")
    assert first.splitlines() == [
        f"Executing op tensor in device {PREFIX}CPU:0",
        f"Executing op ones in device {PREFIX}CPU:1",
        f"Executing op matmul in device {PREFIX}CPU:1",
    ]
    assert second.splitlines() == [f"Executing op mul in device {PREFIX}CPU:0"]
    assert "Executing op" not in third


def test_unknown_device_raises_without_soft_placement_and_falls_back_with_it(fresh):
    proc = fresh(
        """
        import torch
        import multidev as md
        md.config.set_soft_device_placement(False)
        try:
            with md.device("/device:GPU:2"):
                torch.ones(1)
        except md.errors.InvalidArgumentError as e:   # TF 2.21 (OpError, not RuntimeError)
            assert "/job:localhost/replica:0/task:0/device:GPU:2 unknown device." in str(e), e
            assert "/job:localhost/replica:0/task:0/device:CPU:0" in str(e)  # the valid choices
        else:
            raise SystemExit("an unknown device did not raise")
        try:
            md.device("/CPU:3").__enter__()
        except md.errors.InvalidArgumentError as e:   # TF 2.21 (OpError, not RuntimeError)
            assert "device:CPU:3 unknown device." in str(e), e
        from multidev.devices import registry
        try:
            registry.resolve("/job:worker/task:1/device:CPU:0")
        except md.errors.InvalidArgumentError as e:   # TF 2.21 (OpError, not RuntimeError)
            assert "/job:worker/replica:0/task:1/device:CPU:0 unknown device." in str(e), e
        else:
            raise SystemExit("another worker's device resolved locally")
        registry.set_local_task("worker", 1)  # this process is worker 1 of a cluster
        assert registry.resolve("/job:worker/task:1/device:CPU:0").name == "/job:localhost/replica:0/task:0/device:CPU:0"
        md.config.set_soft_device_placement(True)
        with md.device("/device:GPU:2") as placed:
            x = torch.ones(2) + 1
        assert placed.name == "/job:localhost/replica:0/task:0/device:CPU:0" and x.device.type == "cpu"
        """
    )
    assert "device:GPU:2 does not exist; soft device placement runs its ops on" in proc.stderr


def test_nested_scopes_merge_field_by_field_and_initialize(fresh):
    fresh(
        """
        import torch
        import multidev as md
        from multidev.placement import current_device
        from multidev.devices import registry
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 3)
        P = "/job:localhost/replica:0/task:0/device:"
        assert current_device() is None
        with md.device("/job:localhost") as outer:
            assert outer.name == P + "CPU:0"
            with md.device("cpu:2"):
                assert current_device().name == P + "CPU:2"
                assert torch._C._len_torch_function_stack() == 0  # CPU-only, no logging: no mode
                with md.device("/task:0"):  # only the task is given: type and index come from outside
                    assert current_device().name == P + "CPU:2"
                    assert registry.resolve("/replica:0").name == P + "CPU:2"
                with md.device(None):
                    assert current_device().name == P + "CPU:0"
            assert current_device().name == P + "CPU:0"
        assert current_device() is None
        logical = md.config.list_logical_devices("CPU")
        for name in (logical[1], md.DeviceSpec(device_type="CPU", device_index=1), registry.logical_devices()[1]):
            with md.device(name) as d:
                assert d.name == P + "CPU:1"
        with md.device(torch.device("cpu")) as d:
            assert d.name == P + "CPU:0"
        for bad, exc, fragment in [(3, TypeError, "int 3"), ("/gpu:zero", ValueError, "'/gpu:zero'"),
                                   (cpu, TypeError, "md.config.list_logical_devices()")]:
            try:
                md.device(bad)
            except exc as e:
                assert fragment in str(e), e
            else:
                raise SystemExit(f"md.device({bad!r}) did not raise")
        scope = md.device("/cpu:1")
        with scope:
            try:
                scope.__enter__()
            except RuntimeError as e:
                assert "already entered" in str(e)
        try:  # the scopes above initialized the devices
            md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
        except RuntimeError as e:
            assert "Virtual devices cannot be modified after being initialized" in str(e)
        else:
            raise SystemExit("configuration after the first scope did not raise")
        """
    )


def test_scopes_are_thread_local_and_cheap_on_cpu(fresh):
    proc = fresh(
        """
        import threading, torch
        import multidev as md
        from multidev.devices import registry
        from multidev.placement import current_device, device_scope
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
        devices = registry.logical_devices("CPU")
        barrier = threading.Barrier(2, timeout=30)
        seen = {}

        def replica(i):
            with device_scope(devices[i]):
                barrier.wait()  # both threads are inside their scopes now
                seen[i] = (current_device().name, torch._C._len_torch_function_stack())
                torch.ones(2) * i
                barrier.wait()
            seen[i] += (current_device(),)

        def run_replicas():
            threads = [threading.Thread(target=replica, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)

        run_replicas()
        assert seen[0] == (devices[0].name, 0, None) and seen[1] == (devices[1].name, 0, None), seen
        md.debugging.set_log_device_placement(True)
        run_replicas()
        assert seen[0][1] == 1 and seen[1][1] == 1, seen  # logging needs the mode
        try:
            device_scope("/cpu:0")
        except TypeError as e:
            assert "registry.Device" in str(e)
        """
    )
    for i in (0, 1):
        assert f"Executing op mul in device /job:localhost/replica:0/task:0/device:CPU:{i}" in proc.stderr
