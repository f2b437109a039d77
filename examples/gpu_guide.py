"""TensorFlow's "Use a GPU" guide (seeds 000/001), section by section, with multidev.

Every ``tf.`` call of the guide is the same ``md.`` call here; tensors are torch tensors and ops
are torch ops. On a machine without a GPU the GPU-only sections say so and the multi-device
sections run on logical CPU devices instead, so the whole guide runs anywhere:

    python examples/gpu_guide.py                 # 2 logical devices per machine (the default)
    python examples/gpu_guide.py --devices 3

Placement log lines ("Executing op matmul in device ...") go to stderr, as TensorFlow's do.
"""

from __future__ import annotations

import argparse

import torch

import multidev as md


def section(title: str) -> None:
    print(f"\n== {title} ==")


def setup() -> list:
    """Setup: how many GPUs does multidev see? (Listing physical devices initializes nothing.)"""
    section("Setup")
    gpus = md.config.list_physical_devices("GPU")
    print("Num GPUs Available: ", len(gpus))
    print("Physical devices:", md.config.list_physical_devices())
    if not gpus:
        print("No GPU here: the GPU-only sections explain what they would do, and the multi-device "
              "sections use logical CPU devices instead.")
    return gpus


def configure_devices(gpus: list, count: int) -> str:
    """'Using multiple GPUs': split one device into ``count`` logical devices, before anything initializes.

    With a GPU this is the guide's two virtual GPUs of 1 GB each; without one, the CPU is split into
    logical CPUs (which take no memory limit). Returns the device type the rest of the guide uses.
    """
    section("Logical devices (simulate several devices on one)")
    try:
        if gpus:
            config = [md.config.LogicalDeviceConfiguration(memory_limit=1024)] * count
            md.config.set_logical_device_configuration(gpus[0], config)
            kind = "GPU"
        else:
            cpu = md.config.list_physical_devices("CPU")[0]
            md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * count)
            kind = "CPU"
        logical = md.config.list_logical_devices(kind)   # this initializes the devices
        print(len(gpus or [0]), f"Physical {kind},", len(logical), f"Logical {kind}s")
    except RuntimeError as e:   # virtual devices must be set before devices have been initialized
        print(e)
        kind = "GPU" if gpus else "CPU"
    return kind


def log_device_placement() -> None:
    """'Logging device placement': every op says where it ran (on stderr)."""
    section("Logging device placement")
    md.debugging.set_log_device_placement(True)
    a = md.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = md.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    c = torch.matmul(a, b)
    print(c)


def manual_device_placement(kind: str) -> None:
    """'Manual device placement': ``md.device`` pins the ops created in its scope."""
    section("Manual device placement")
    with md.device("/CPU:0"):          # place tensors on the CPU
        a = md.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        b = md.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    with md.device(f"/{kind}:1"):      # run the matmul on the second logical device
        c = torch.matmul(a, b)
    print(c)


def limit_memory_growth(gpus: list) -> None:
    """'Limiting GPU memory growth': too late once devices are initialized, as in the guide."""
    section("Limiting GPU memory growth")
    if not gpus:
        print("No GPU: memory growth and memory limits apply to GPUs only "
              "(md.config.experimental.set_memory_growth(cpu, True) raises ValueError).")
        try:
            md.config.experimental.set_memory_growth(md.config.list_physical_devices("CPU")[0], True)
        except ValueError as e:
            print("ValueError:", e)
        return
    try:
        md.config.set_visible_devices(gpus[0], "GPU")   # restrict multidev to the first GPU
    except RuntimeError as e:   # visible devices must be set before GPUs have been initialized
        print(e)
    try:
        # Currently, memory growth needs to be the same across GPUs
        for gpu in gpus:
            md.config.experimental.set_memory_growth(gpu, True)
    except (RuntimeError, ValueError) as e:   # growth and memory limits exclude each other; must precede init
        print(e)
    try:
        md.config.set_logical_device_configuration(gpus[0], [md.config.LogicalDeviceConfiguration(memory_limit=512)])
    except RuntimeError as e:
        print(e)


def single_device_on_multi_device_system(kind: str) -> None:
    """'Using a single GPU on a multi-GPU system': unknown devices raise unless soft placement is on."""
    section("Using a single device on a multi-device system")
    md.config.set_soft_device_placement(False)
    try:
        with md.device(f"/device:{kind}:7"):   # an invalid device
            a = md.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
            b = md.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
            c = torch.matmul(a, b)
    except RuntimeError as e:   # the guide's; TF 2.21's `except md.errors.InvalidArgumentError` catches it too
        print(e)
    md.config.set_soft_device_placement(True)
    with md.device(f"/device:{kind}:7"):       # soft placement picks an existing device
        a = md.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        b = md.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        c = torch.matmul(a, b)
    print(c)


def multiple_devices_with_strategy(kind: str) -> None:
    """'Using multiple GPUs' with ``md.distribute.MirroredStrategy``: one replica per logical device."""
    section("Multiple devices with md.distribute.Strategy")
    md.debugging.set_log_device_placement(False)     # keep the training quiet
    devices = md.config.list_logical_devices(kind)
    strategy = md.distribute.MirroredStrategy(devices)
    print("Replicas:", strategy.num_replicas_in_sync, strategy.extended.worker_devices)
    with strategy.scope():
        inputs = md.keras.layers.Input(shape=(1,))
        predictions = md.keras.layers.Dense(1)(inputs)
        model = md.keras.models.Model(inputs=inputs, outputs=predictions)
        model.compile(loss="mse", optimizer=md.keras.optimizers.SGD(learning_rate=0.2))
    x = torch.linspace(-1, 1, 64).reshape(-1, 1)
    history = model.fit(x, 2 * x + 1, batch_size=16, epochs=5, verbose=0)
    print("kernel:", model.layers[-1].kernel)
    print(f"loss after 5 epochs: {history.history['loss'][-1]:.4f}")


def multiple_devices_manually(kind: str) -> None:
    """'Manual placement': replicate the computation on every device, add the results on the CPU."""
    section("Multiple devices with manual placement")
    md.debugging.set_log_device_placement(True)
    c = []
    for dev in md.config.list_logical_devices(kind):
        with md.device(dev.name):
            a = md.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
            b = md.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
            c.append(torch.matmul(a, b))
    with md.device("/CPU:0"):
        matmul_sum = md.add_n(c)                 # torch.stack(c).sum(0) in plain torch
    print(matmul_sum)
    md.debugging.set_log_device_placement(False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2, metavar="N",
                        help="logical devices to split the first GPU (or the CPU) into (default 2)")
    args = parser.parse_args(argv)
    if args.devices < 2:
        parser.error(f"--devices must be at least 2 to show several devices, got {args.devices}")
    gpus = setup()
    kind = configure_devices(gpus, args.devices)
    log_device_placement()
    manual_device_placement(kind)
    limit_memory_growth(gpus)
    single_device_on_multi_device_system(kind)
    multiple_devices_with_strategy(kind)
    multiple_devices_manually(kind)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
