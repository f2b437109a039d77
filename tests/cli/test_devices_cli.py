"""``multidev devices``: the table, --json, logical device options and bad options."""

import json

RUN = "import sys; from multidev.cli.main import main; sys.exit(main({argv!r}))"


def test_table_lists_physical_and_logical_devices(fresh):
    out = fresh(RUN.format(argv=["devices"])).stdout.splitlines()
    assert out[0].split() == ["KIND", "NAME", "TYPE", "TORCH", "MEMORY", "TOTAL", "MEMORY", "USED", "VISIBLE"]
    physical = [line.split() for line in out if line.startswith("physical")]
    logical = [line.split() for line in out if line.startswith("logical")]
    assert physical[0][:4] == ["physical", "/physical_device:CPU:0", "CPU", "cpu"] and physical[0][-1] == "yes"
    assert physical[0][5] == "MB"  # the host's total memory is known
    assert logical[0][:4] == ["logical", "/job:localhost/replica:0/task:0/device:CPU:0", "CPU", "cpu"]
    text = "\n".join(out)   # one CPU, no GPU: the table says how to get several replicas
    assert "1 replica on this machine" in text and "MULTIDEV_LOGICAL_CPUS=2" in text
    assert "set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)" in text


def test_split_cpu_needs_no_hint(fresh):
    out = fresh(RUN.format(argv=["devices", "--logical-cpus", "2"])).stdout
    assert "device:CPU:1" in out and "1 replica on this machine" not in out


def test_json_with_logical_cpus(fresh):
    data = json.loads(fresh(RUN.format(argv=["devices", "--json", "--logical-cpus", "3"])).stdout)
    assert [d["name"] for d in data["logical"]] == [
        f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(3)
    ]
    cpu = data["physical"][0]
    assert cpu["type"] == "CPU" and cpu["visible"] is True and cpu["memory_total"] > 0
    assert all(d["torch_device"] == "cpu" and d["memory_total"] is None for d in data["logical"])


def test_bad_options_exit_2_with_a_message(capsys):
    # Validated before any configuration changes, so this can run in the test process.
    from multidev.cli.main import main

    for argv, fragment in [
        (["devices", "--logical-cpus", "0"], "--logical-cpus must be >= 1, got 0"),
        (["devices", "--memory-limit", "10"], "--memory-limit needs --logical-gpus"),
        (["devices", "--logical-gpus", "2"], "--logical-gpus N needs N >= 1 and --memory-limit MB"),
    ]:
        assert main(argv) == 2
        assert fragment in capsys.readouterr().err
