"""Seed 003, "Does tf.device('/gpu:0') utilize all available GPUs?" — no; its three examples with multidev.

``md.device('/gpu:0')`` pins ops to that one device; the others stay idle. Placing ops on two
devices by hand works but you move data yourself; a strategy replicates the model on every device
and splits each batch between them. Without a GPU, two logical CPUs play the two GPUs:

    python examples/device_placement_qa.py
    python examples/device_placement_qa.py --size 10000 --epochs 10     # the answer's sizes (slow on a CPU)

Placement log lines ("Executing op matmul in device ...") go to stderr.
"""

from __future__ import annotations

import argparse

import multidev as md


def configure() -> str:
    """Two logical CPUs when there is no GPU; returns the device type the examples use."""
    if md.config.list_physical_devices("GPU"):
        return "GPU"
    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
    print("No GPU: the examples use two logical CPU devices, '/cpu:0' and '/cpu:1', in place of '/gpu:0' and '/gpu:1'.")
    return "CPU"


def single_device(torch, kind: str, size: int) -> None:
    """Example 1: everything in the scope runs on device 0; device 1 does nothing."""
    print(f"\n== Example 1: one device (/{kind.lower()}:0) ==")
    with md.device(f"/{kind.lower()}:0"):
        a = torch.randn(size, size)      # create a large tensor
        b = torch.matmul(a, a)           # perform a matrix multiplication
    print("b:", tuple(b.shape), "- the placement log shows every op on device 0")


def two_devices_by_hand(torch, kind: str, size: int) -> None:
    """Example 2: two devices by hand; the final add needs both results on one device."""
    print("\n== Example 2: two devices placed by hand ==")
    half = size // 2
    with md.device(f"/{kind.lower()}:0"):
        a = torch.randn(half, half)
        b = torch.matmul(a, a)
    with md.device(f"/{kind.lower()}:1"):
        c = torch.randn(half, half)
        d = torch.matmul(c, c)
    e = torch.add(b, d)                  # runs on the default device; b or d is copied there first
    print("e:", tuple(e.shape), "- matmuls on devices 0 and 1, the add on device 0 (see the placement log)")


def strategy_fit(torch, epochs: int, examples: int) -> None:
    """Example 3: MirroredStrategy replicates the model on every device and splits each batch."""
    print("\n== Example 3: md.distribute.MirroredStrategy ==")
    md.debugging.set_log_device_placement(False)   # training would log every op
    x_train = torch.randn(examples, 32)
    y_train = torch.randn(examples, 10)
    kind = "GPU" if md.config.list_logical_devices("GPU") else "CPU"
    strategy = md.distribute.MirroredStrategy()   # every logical GPU, else every logical CPU
    print("replicas:", strategy.num_replicas_in_sync, strategy.extended.worker_devices)
    with strategy.scope():
        # Model definition
        model = md.keras.Sequential([
            md.keras.layers.Dense(1024, activation="relu"),
            md.keras.layers.Dense(10),
        ])
        # Compile the model
        model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    # Train the model
    model.fit(x_train, y_train, epochs=epochs, verbose=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000, help="matrix size (the answer uses 10000; 1000 by default)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of example 3 (the answer uses 10)")
    parser.add_argument("--examples", type=int, default=1024, help="training examples of example 3 (1024)")
    args = parser.parse_args(argv)
    for name, minimum in (("size", 2), ("epochs", 1), ("examples", 1)):
        if getattr(args, name) < minimum:
            parser.error(f"--{name} must be >= {minimum}, got {getattr(args, name)}")
    kind = configure()
    import torch

    md.debugging.set_log_device_placement(True)
    single_device(torch, kind, args.size)
    two_devices_by_hand(torch, kind, args.size)
    strategy_fit(torch, args.epochs, args.examples)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
