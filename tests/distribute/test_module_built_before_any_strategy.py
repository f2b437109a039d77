"""A module built before any strategy existed (so before multidev's registration hooks were live) and
trained by several replicas of ``strategy.run`` is refused before any update, as one built outside
the scope while a strategy lives is: its one set of parameters would be updated by every replica."""

from __future__ import annotations


def test_module_built_before_the_first_strategy_is_refused_before_any_update(fresh):
    fresh("""
        import torch
        import multidev as md

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)          # no strategy exists yet
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
        strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        before = [p.detach().clone() for p in model.parameters()]

        def step(x, y):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()

        x, y = torch.randn(8, 5), torch.randn(8, 1)
        halves = lambda t: strategy.experimental_distribute_values_from_function(
            lambda ctx: t[ctx.replica_id_in_sync_group * 4:(ctx.replica_id_in_sync_group + 1) * 4])
        try:
            strategy.run(step, args=(halves(x), halves(y)))
        except ValueError as err:
            message = str(err)
        else:
            raise AssertionError("a module shared by two replicas trained without an error")
        assert "outside MirroredStrategy.scope()" in message and "strategy.scope()" in message, message
        assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before)), "no replica updated it"

        # The same module only read (frozen) in the replicas is fine.
        model.requires_grad_(False)
        out = strategy.run(lambda a: model(a), args=(halves(x),))
        assert len(strategy.experimental_local_results(out)) == 2
        # A module (and optimizer) each replica builds for itself is its own: stepping it is fine.
        def own(x):
            layer = torch.nn.Linear(5, 1)
            own_opt = torch.optim.SGD(layer.parameters(), lr=0.1)
            layer(x).sum().backward()
            own_opt.step()
            return layer.weight.detach().clone()
        assert len(strategy.experimental_local_results(strategy.run(own, args=(halves(x),)))) == 2
        print("ok")
    """)
