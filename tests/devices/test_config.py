"""md.config: listing, configuration before initialization, freezing, errors (fresh interpreters)."""

from .fake_gpus import fake_gpus

MB = 1024 * 1024


def test_physical_listing_does_not_initialize_and_logical_listing_freezes(fresh):
    fresh(
        """
        import multidev as md
        cpus = md.config.list_physical_devices("CPU")
        assert cpus == [md.config.PhysicalDevice("/physical_device:CPU:0", "CPU")], cpus
        assert md.config.list_physical_devices() == cpus  # no GPU on this machine
        assert md.config.list_physical_devices("gpu") == []
        # Still configurable: listing physical devices does not initialize.
        md.config.set_logical_device_configuration(cpus[0], [md.config.LogicalDeviceConfiguration()] * 2)
        names = [d.name for d in md.config.list_logical_devices()]
        assert names == ["/device:CPU:0", "/device:CPU:1"], names  # TensorFlow's local names
        # Frozen now, with TensorFlow's messages; the same value again is a no-op.
        md.config.set_logical_device_configuration(cpus[0], [md.config.LogicalDeviceConfiguration()] * 2)
        md.config.set_visible_devices(cpus)
        try:
            md.config.set_logical_device_configuration(cpus[0], [md.config.LogicalDeviceConfiguration()] * 3)
        except RuntimeError as e:
            assert str(e) == "Virtual devices cannot be modified after being initialized", e
        else:
            raise SystemExit("re-configuring logical devices after initialization did not raise")
        assert len(md.config.get_logical_device_configuration(cpus[0])) == 2
        """
    )


def test_logical_cpus_are_distinct_devices_on_the_torch_cpu(fresh):
    fresh(
        """
        import torch
        import multidev as md
        from multidev.devices import registry
        cpu = md.config.list_physical_devices("CPU")[0]
        assert md.config.get_logical_device_configuration(cpu) is None
        md.config.experimental.set_virtual_device_configuration(
            cpu, [md.config.experimental.VirtualDeviceConfiguration()] * 4)
        devices = registry.logical_devices("CPU")
        assert [d.index for d in devices] == [0, 1, 2, 3]
        assert {d.torch_device for d in devices} == {torch.device("cpu")}
        assert {d.physical_index for d in devices} == {0} and {d.memory_limit for d in devices} == {None}
        assert len(set(devices)) == 4 and devices[3].name.endswith("/device:CPU:3")
        assert md.config.list_logical_devices("GPU") == [] and registry.logical_devices("GPU") == []
        assert registry.stream_for(devices[1]) is None
        assert md.config.experimental.get_virtual_device_configuration(cpu) == [
            md.config.LogicalDeviceConfiguration()] * 4
        """
    )


def test_cpu_memory_limit_and_bad_configurations_leave_nothing_half_applied(fresh):
    fresh(
        """
        import multidev as md
        LDC = md.config.LogicalDeviceConfiguration
        cpu = md.config.list_physical_devices("CPU")[0]

        def raises(exc, fn, *fragments):
            try:
                fn()
            except exc as e:
                for f in fragments:
                    assert f in str(e), (f, str(e))
            else:
                raise SystemExit(f"{fn} did not raise {exc.__name__}")

        raises(ValueError, lambda: md.config.set_logical_device_configuration(cpu, [LDC(), LDC(memory_limit=512)]),
               "Setting memory limit on CPU virtual devices is currently not supported", "512")
        raises(ValueError, lambda: md.config.set_logical_device_configuration(cpu, []), "empty")
        raises(TypeError, lambda: md.config.set_logical_device_configuration(cpu, LDC()), "list")
        raises(TypeError, lambda: md.config.set_logical_device_configuration(cpu, [LDC(), 2]), "2")
        logical = md.config.LogicalDevice("/job:localhost/replica:0/task:0/device:CPU:0", "CPU")
        raises(ValueError, lambda: md.config.set_logical_device_configuration(logical, [LDC()]),
               "Unrecognized device", "LogicalDevice", "/physical_device:CPU:0")
        raises(ValueError, lambda: md.config.set_logical_device_configuration("/cpu:0", [LDC()]),
               "Unrecognized device", "'/cpu:0'")
        raises(ValueError, lambda: md.config.list_physical_devices("cuda"), "'cuda'", "Did you mean 'GPU'")
        raises(TypeError, lambda: md.config.list_logical_devices(0), "got 0")
        # None of the failed calls changed anything, and nothing got initialized.
        assert md.config.get_logical_device_configuration(cpu) is None
        md.config.set_logical_device_configuration(cpu, [LDC(), LDC()])
        assert len(md.config.list_logical_devices("CPU")) == 2
        """
    )


def test_visible_devices_keep_the_cpu_and_freeze(fresh):
    fresh(
        fake_gpus(
            2,
            """
        import multidev as md
        cpu = md.config.list_physical_devices("CPU")
        gpus = md.config.list_physical_devices("GPU")
        assert [g.name for g in gpus] == ["/physical_device:GPU:0", "/physical_device:GPU:1"]
        assert md.config.get_visible_devices() == cpu + gpus
        for bad in (lambda: md.config.set_visible_devices([], "CPU"), lambda: md.config.set_visible_devices(gpus)):
            try:
                bad()
            except ValueError as e:
                assert "no visible CPU" in str(e) and "set_visible_devices([], 'GPU')" in str(e), e
            else:
                raise SystemExit("hiding the CPU did not raise")
        try:
            md.config.set_visible_devices(cpu[0], "GPU")
        except ValueError as e:
            assert "Unrecognized device" in str(e) and "'GPU'" in str(e), e
        try:
            md.config.set_visible_devices("GPU:0")
        except TypeError as e:
            assert "'GPU:0'" in str(e), e
        assert md.config.get_visible_devices() == cpu + gpus  # untouched by the errors
        md.config.set_visible_devices(gpus[1], "GPU")
        assert md.config.get_visible_devices("GPU") == [gpus[1]]
        logical = md.config.list_logical_devices("GPU")
        assert logical == [md.config.LogicalDevice("/device:GPU:0", "GPU")], logical
        from multidev.devices import registry
        assert registry.logical_devices("GPU")[0].physical_index == 1
        md.config.set_visible_devices([gpus[1]], "GPU")  # same value: no-op
        try:
            md.config.set_visible_devices([], "GPU")
        except RuntimeError as e:
            assert str(e) == "Visible devices cannot be modified after being initialized", e
        else:
            raise SystemExit("changing visible devices after initialization did not raise")
        """,
        )
    )


def test_memory_growth_must_match_on_every_gpu_and_freezes(fresh):
    fresh(
        fake_gpus(
            2,
            """
        import multidev as md
        cpu = md.config.list_physical_devices("CPU")[0]
        g0, g1 = md.config.list_physical_devices("GPU")
        for call in (lambda: md.config.experimental.set_memory_growth(cpu, True),
                     lambda: md.config.experimental.get_memory_growth(cpu)):
            try:
                call()
            except ValueError as e:
                assert "non-GPU" in str(e) and "/physical_device:CPU:0" in str(e), e
            else:
                raise SystemExit("memory growth on the CPU did not raise")
        try:
            md.config.experimental.set_memory_growth(g0, "yes")
        except TypeError as e:
            assert "'yes'" in str(e)
        assert md.config.experimental.get_memory_growth(g0) is None
        md.config.experimental.set_memory_growth(g0, True)
        try:
            md.config.list_logical_devices()
        except ValueError as e:
            assert "Memory growth cannot differ between GPU devices" in str(e), e
        else:
            raise SystemExit("differing memory growth did not raise")
        # The failed initialization froze nothing: fix the configuration and go on.
        md.config.experimental.set_memory_growth(g1, True)
        assert len(md.config.list_logical_devices("GPU")) == 2
        md.config.experimental.set_memory_growth(g1, True)  # same value: no-op
        try:
            md.config.experimental.set_memory_growth(g1, False)
        except RuntimeError as e:
            assert str(e) == "Physical devices cannot be modified after being initialized", e
        else:
            raise SystemExit("changing memory growth after initialization did not raise")
        assert md.config.experimental.get_memory_growth(g1) is True
        """,
        )
    )


def test_growth_environment_variables_force_growth(fresh):
    code = (
        fake_gpus(
            2,
            """
        import multidev as md
        g0, g1 = md.config.list_physical_devices("GPU")
        assert md.config.experimental.get_memory_growth(g0) is True
        md.config.experimental.set_memory_growth(g1, False)
        assert len(md.config.list_logical_devices("GPU")) == 2  # forced growth: no conflict
        """,
        )
    )
    fresh(code, env={"TF_FORCE_GPU_ALLOW_GROWTH": "true"})
    fresh(code, env={"MULTIDEV_FORCE_GPU_ALLOW_GROWTH": "TRUE"})


def test_logical_gpus_need_positive_memory_limits(fresh):
    fresh(
        fake_gpus(
            1,
            f"""
        import multidev as md
        from multidev.devices import registry
        LDC = md.config.LogicalDeviceConfiguration
        gpu = md.config.list_physical_devices("GPU")[0]
        cases = [([LDC()], ValueError, "Setting memory limit is required for GPU virtual devices"),
                 ([LDC(memory_limit=-5)], ValueError, "-5"),
                 ([LDC(memory_limit=0)], ValueError, "positive"),
                 ([LDC(memory_limit=1.5)], TypeError, "1.5"),
                 ([LDC(memory_limit=True)], TypeError, "True")]
        for configs, exc, fragment in cases:
            try:
                md.config.set_logical_device_configuration(gpu, configs)
            except exc as e:
                assert fragment in str(e), (fragment, str(e))
            else:
                raise SystemExit(f"{{configs}} did not raise")
        assert md.config.get_logical_device_configuration(gpu) is None
        md.config.set_logical_device_configuration(gpu, [LDC(memory_limit=100), LDC(memory_limit=50)])
        try:
            md.config.experimental.set_memory_growth(gpu, True)
        except ValueError as e:
            assert "virtual devices configured" in str(e)
        else:
            raise SystemExit("growth on a split GPU did not raise")
        g0, g1 = registry.logical_devices("GPU")
        assert (g0.name, g1.name) == ("/job:localhost/replica:0/task:0/device:GPU:0",
                                      "/job:localhost/replica:0/task:0/device:GPU:1")
        assert (g0.memory_limit, g1.memory_limit) == (100 * {MB}, 50 * {MB})
        assert g0.physical_index == g1.physical_index == 0 and g0.index == 0 and g1.index == 1
        assert md.config.experimental.get_memory_info("GPU:1") == {{"current": 0, "peak": 0}}
        """,
        )
    )


def test_memory_info_and_device_details_reject_bad_devices(fresh):
    fresh(
        """
        import multidev as md
        for name in ("CPU:0", "/device:CPU:0"):   # TF 2.21: zeros for a CPU, no error
            assert md.config.experimental.get_memory_info(name) == {"current": 0, "peak": 0}
            assert md.config.experimental.reset_memory_stats(name) is None
            assert md.config.experimental.get_memory_usage(name) == 0
        for name, fragment in [("GPU:5", "No device found with the device name 'GPU:5'"),
                               ("/job:worker/task:3/device:CPU:0", "No device found")]:
            for fn in (md.config.experimental.get_memory_info, md.config.experimental.reset_memory_stats,
                       md.config.experimental.get_memory_usage):
                try:
                    fn(name)
                except ValueError as e:
                    assert fragment in str(e), (fragment, str(e))
                else:
                    raise SystemExit(f"{fn.__name__}({name!r}) did not raise")
        try:
            md.config.experimental.get_memory_info(0)
        except TypeError as e:
            assert "got 0" in str(e)
        cpu = md.config.list_physical_devices("CPU")[0]
        assert md.config.experimental.get_device_details(cpu) == {}
        try:
            md.config.experimental.get_device_details("/physical_device:CPU:0")
        except ValueError as e:
            assert "Unrecognized device: '/physical_device:CPU:0'" in str(e), e
        else:
            raise SystemExit("a string did not raise")
        """
    )
