"""md.train.Checkpoint through the public API: round trips, numbering, status checks, errors."""

from __future__ import annotations

import json
import os

import pytest
import torch

import multidev as md
from multidev import keras


def _model():
    model = keras.Sequential([keras.layers.Dense(3, activation="relu"), keras.layers.Dense(1)])
    return model, keras.optimizers.Adam(0.05)


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)


def _step(model, opt, x, y):
    with md.GradientTape() as tape:
        loss = md.reduce_mean((model(x) - y) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return float(loss.detach())


def _same_weights(a, b):
    return all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))


def test_keras_model_and_optimizer_round_trip_and_train_on_identically(tmp_path):
    x, y = _data()
    model, opt = _model()
    for _ in range(3):
        _step(model, opt, x, y)
    ckpt = md.train.Checkpoint(model=model, optimizer=opt, step=md.Variable(7))
    path = ckpt.save(str(tmp_path / "ckpt"))
    assert path == str(tmp_path / "ckpt-1")

    model2, opt2 = _model()
    model2(x[:1])                                   # built, different random weights
    ckpt2 = md.train.Checkpoint(model=model2, optimizer=opt2, step=md.Variable(0))
    ckpt2.restore(path).assert_consumed()
    assert _same_weights(model, model2) and int(ckpt2.step) == 7 and int(opt2.iterations) == 3
    # Adam's moments came back too: the next steps are bit-identical.
    for _ in range(2):
        assert _step(model, opt, x, y) == _step(model2, opt2, x, y)
    assert _same_weights(model, model2)


def test_torch_module_and_torch_optimizer_round_trip(tmp_path):
    x, y = _data()
    net = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 1))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    prefix = md.train.Checkpoint(net=net, opt=opt).write(str(tmp_path / "t"))
    assert prefix == str(tmp_path / "t")

    net2 = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 1))
    opt2 = torch.optim.SGD(net2.parameters(), lr=0.5, momentum=0.9)
    md.train.Checkpoint(net=net2, opt=opt2).read(prefix).assert_consumed()
    assert opt2.param_groups[0]["lr"] == 0.1 and _same_weights(net, net2)
    for model, o in ((net, opt), (net2, opt2)):
        o.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        o.step()
    assert _same_weights(net, net2)


def test_save_numbers_checkpoints_and_keeps_the_index_file(tmp_path):
    v = md.Variable(1.0)
    ckpt = md.train.Checkpoint(v=v)
    assert md.train.latest_checkpoint(str(tmp_path)) is None
    first = ckpt.save(str(tmp_path / "ckpt"))
    v.assign(2.0)
    second = ckpt.save(str(tmp_path / "ckpt"))
    assert (first, second) == (str(tmp_path / "ckpt-1"), str(tmp_path / "ckpt-2"))
    assert int(ckpt.save_counter) == 2
    assert md.train.latest_checkpoint(str(tmp_path)) == second
    text = (tmp_path / "checkpoint").read_text()
    assert 'model_checkpoint_path: "ckpt-2"' in text and 'all_model_checkpoint_paths: "ckpt-2"' in text
    # The object graph is JSON, the tensors safetensors: nothing pickled.
    graph = json.loads((tmp_path / "ckpt-2.index").read_text())
    assert graph["objects"]["v"] == {"kind": "variable", "tensors": {"value": "v:value"}}
    ckpt.restore(first)
    assert float(v) == 1.0 and int(ckpt.save_counter) == 1


def test_restore_from_a_directory_uses_its_latest_checkpoint(tmp_path):
    v = md.Variable([1.0, 2.0])
    ckpt = md.train.Checkpoint(v=v)
    ckpt.save(str(tmp_path / "ckpt"))
    v.assign([5.0, 5.0])
    ckpt.restore(str(tmp_path)).assert_consumed()
    assert v.tolist() == [1.0, 2.0]


def test_restore_none_restores_nothing():
    status = md.train.Checkpoint(v=md.Variable(1.0)).restore(None)
    for check in (status.assert_consumed, status.assert_existing_objects_matched, status.assert_nontrivial_match):
        with pytest.raises(AssertionError, match="No checkpoint specified"):
            check()
    assert status.expect_partial() is status


def test_status_checks_partial_restores(tmp_path):
    a, b = md.Variable(1.0), md.Variable(2.0)
    prefix = md.train.Checkpoint(a=a, b=b).write(str(tmp_path / "w"))
    # The program has fewer objects than the checkpoint: existing ones matched, not consumed.
    a2 = md.Variable(0.0)
    status = md.train.Checkpoint(a=a2).read(prefix)
    assert float(a2) == 1.0
    status.assert_existing_objects_matched().assert_nontrivial_match()
    with pytest.raises(AssertionError, match="b:value"):
        status.assert_consumed()
    status.expect_partial()
    # The program has more objects than the checkpoint: nothing is consumed-complete or matched.
    status = md.train.Checkpoint(a=md.Variable(0.0), c=md.Variable(3.0)).read(prefix).expect_partial()
    with pytest.raises(AssertionError, match="'c'"):
        status.assert_existing_objects_matched()
    # Nothing in common.
    status = md.train.Checkpoint(z=md.Variable(0.0)).read(prefix).expect_partial()
    with pytest.raises(AssertionError, match="Nothing in checkpoint"):
        status.assert_nontrivial_match()


def test_read_of_a_saved_checkpoint_does_not_expect_save_counter(tmp_path):
    v = md.Variable(1.0)
    path = md.train.Checkpoint(v=v).save(str(tmp_path / "ckpt"))
    ckpt = md.train.Checkpoint(v=md.Variable(0.0))
    with pytest.raises(AssertionError, match="save_counter"):
        ckpt.read(path).expect_partial().assert_consumed()
    ckpt.restore(path).assert_consumed()


def test_nested_checkpoints_and_shared_objects_are_stored_once(tmp_path):
    x, y = _data()
    model, opt = _model()
    _step(model, opt, x, y)
    shared = md.Variable(4.0)
    inner = md.train.Checkpoint(model=model, v=shared)
    prefix = md.train.Checkpoint(inner=inner, optimizer=opt, again=shared).write(str(tmp_path / "n"))
    graph = json.loads((tmp_path / "n.index").read_text())
    assert graph["objects"]["inner/v"] == {"alias": "again"}        # breadth-first: the shallower path wins

    model2, opt2 = _model()
    model2(x[:1])
    shared2 = md.Variable(0.0)
    status = md.train.Checkpoint(inner=md.train.Checkpoint(model=model2, v=shared2), optimizer=opt2,
                                 again=shared2).read(prefix)
    status.assert_consumed()
    assert _same_weights(model, model2) and float(shared2) == 4.0
    assert _step(model, opt, x, y) == _step(model2, opt2, x, y)


def test_iterator_position_is_restored(tmp_path):
    ds = md.data.Dataset.range(10).batch(2)
    it = iter(ds)
    next(it), next(it)
    prefix = md.train.Checkpoint(it=it).write(str(tmp_path / "it"))
    assert next(it).tolist() == [4, 5]
    it2 = iter(ds)
    md.train.Checkpoint(it=it2).read(prefix).assert_consumed()
    assert next(it2).tolist() == [4, 5]
    # Restoring an iterator that already went further starts a new pass at the saved position.
    md.train.Checkpoint(it=it).read(prefix)
    assert [b.tolist() for b in it] == [[4, 5], [6, 7], [8, 9]]


def test_unknown_trackable_types_raise_naming_the_argument():
    with pytest.raises(ValueError, match=r"expecting model to be a trackable object.*got 3 of type int"):
        md.train.Checkpoint(model=3)
    with pytest.raises(ValueError, match=r"expecting w to be .*md.Variable"):
        md.train.Checkpoint(w=torch.ones(2))
    ckpt = md.train.Checkpoint()
    with pytest.raises(ValueError, match="expecting later"):
        ckpt.later = "text"
    with pytest.raises(TypeError, match="max_to_keep|checkpoint"):
        md.train.CheckpointManager("not a checkpoint", "/tmp/x", max_to_keep=1)


def test_shape_mismatch_raises_and_changes_nothing(tmp_path):
    prefix = md.train.Checkpoint(a=md.Variable(1.0), b=md.Variable([1.0, 2.0])).write(str(tmp_path / "w"))
    a, b = md.Variable(9.0), md.Variable([9.0, 9.0, 9.0])
    with pytest.raises(ValueError, match=r"b:value: checkpoint \(2,\) vs variable \(3,\)"):
        md.train.Checkpoint(a=a, b=b).read(prefix)
    assert float(a) == 9.0


def test_missing_and_damaged_checkpoints_raise(tmp_path):
    with pytest.raises(md.errors.NotFoundError, match="does not exist"):
        md.train.Checkpoint(v=md.Variable(1.0)).restore(str(tmp_path / "nope"))
    with pytest.raises(md.errors.NotFoundError, match="without checkpoints"):
        md.train.Checkpoint(v=md.Variable(1.0)).restore(str(tmp_path))
    prefix = md.train.Checkpoint(v=md.Variable(1.0)).write(str(tmp_path / "w"))
    data = tmp_path / "w.data.safetensors"
    data.write_bytes(data.read_bytes()[:-2] + b"xx")
    with pytest.raises(md.errors.DataLossError, match="checksum"):
        md.train.Checkpoint(v=md.Variable(0.0)).read(prefix)


def test_a_save_killed_before_its_commit_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    v = md.Variable(1.0)
    ckpt = md.train.Checkpoint(v=v)
    first = ckpt.save(str(tmp_path / "ckpt"))
    real_replace = os.replace

    def crash_on_index(src, dst):
        if str(dst).endswith(".index"):
            raise KeyboardInterrupt("killed")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_index)
    v.assign(2.0)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save(str(tmp_path / "ckpt"))
    monkeypatch.setattr(os, "replace", real_replace)
    assert md.train.latest_checkpoint(str(tmp_path)) == first
    assert not any(name.startswith(".tmp_") for name in os.listdir(tmp_path))
    restored = md.Variable(0.0)
    md.train.Checkpoint(v=restored).restore(md.train.latest_checkpoint(str(tmp_path))).assert_consumed()
    assert float(restored) == 1.0


def test_distributed_iterator_position_is_restored(tmp_path):
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    ds = md.data.Dataset.range(16).batch(4)
    it = iter(strategy.experimental_distribute_dataset(ds))
    next(it)
    prefix = md.train.Checkpoint(it=it).write(str(tmp_path / "dist"))
    it2 = iter(strategy.experimental_distribute_dataset(ds))
    md.train.Checkpoint(it=it2).read(prefix).assert_consumed()
    assert [t.tolist() for t in next(it2).values] == [[4, 5], [6, 7]]


def test_a_compiled_model_carries_its_optimizer(tmp_path):
    x, y = _data()
    model, _ = _model()
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    prefix = md.train.Checkpoint(model=model).write(str(tmp_path / "m"))
    model2, _ = _model()
    model2.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    model2.build((None, 4))
    md.train.Checkpoint(model=model2).read(prefix).assert_consumed()
    assert int(model2.optimizer.iterations) == 2
    # The tutorials' form names the optimizer twice: it is stored once.
    prefix = md.train.Checkpoint(model=model, optimizer=model.optimizer).write(str(tmp_path / "both"))
    assert json.loads((tmp_path / "both.index").read_text())["objects"]["model/optimizer"] == {"alias": "optimizer"}
    md.train.Checkpoint(model=model2, optimizer=model2.optimizer).read(prefix).assert_consumed()
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    model2.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    assert _same_weights(model, model2)


def test_checkpoints_can_be_inspected_without_the_objects(tmp_path):
    ckpt = md.train.Checkpoint(step=md.Variable(3), net=torch.nn.Linear(2, 4))
    ckpt.save(str(tmp_path / "ckpt"))
    assert md.train.list_variables(str(tmp_path)) == [("net:bias", [4]), ("net:weight", [4, 2]),
                                                      ("save_counter:value", []), ("step:value", [])]
    assert int(md.train.load_variable(str(tmp_path), "step:value")) == 3
    reader = md.train.load_checkpoint(str(tmp_path / "ckpt-1"))
    assert reader.has_tensor("net:weight") and reader.get_variable_to_dtype_map()["step:value"] == torch.int32
    with pytest.raises(md.errors.NotFoundError, match="'nope' not found.*net:bias"):
        reader.get_tensor("nope")


def test_torch_optimizer_state_restores_with_or_without_its_module(tmp_path):
    x, y = _data()
    net = torch.nn.Linear(4, 1)
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    opt.zero_grad()
    torch.nn.functional.mse_loss(net(x), y).backward()
    opt.step()
    with_net = md.train.Checkpoint(net=net, opt=opt).write(str(tmp_path / "with"))
    alone = md.train.Checkpoint(opt=opt).write(str(tmp_path / "alone"))
    for prefix, make in ((with_net, lambda n, o: md.train.Checkpoint(opt=o)),
                         (alone, lambda n, o: md.train.Checkpoint(net=n, opt=o))):
        net2 = torch.nn.Linear(4, 1)
        opt2 = torch.optim.Adam(net2.parameters(), lr=0.1)
        make(net2, opt2).read(prefix).expect_partial()
        exp_avg = [opt2.state[p]["exp_avg"] for p in net2.parameters()]
        assert all(torch.equal(a, opt.state[p]["exp_avg"]) for a, p in zip(exp_avg, net.parameters()))


@pytest.mark.gpu
def test_a_checkpoint_moves_between_gpu_and_cpu(tmp_path):
    net = torch.nn.Linear(3, 2).to("cuda")
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    net(torch.ones(1, 3, device="cuda")).sum().backward()
    opt.step()
    prefix = md.train.Checkpoint(net=net, opt=opt).write(str(tmp_path / "gpu"))
    cpu_net = torch.nn.Linear(3, 2)
    cpu_opt = torch.optim.Adam(cpu_net.parameters(), lr=0.1)
    md.train.Checkpoint(net=cpu_net, opt=cpu_opt).read(prefix).assert_consumed()
    assert torch.equal(cpu_net.weight, net.weight.cpu())
    assert all(s["exp_avg"].device.type == "cpu" for s in cpu_opt.state.values())
    back = torch.nn.Linear(3, 2).to("cuda")
    md.train.Checkpoint(net=back).read(prefix).expect_partial()
    assert torch.equal(back.weight, net.weight)


def test_deleted_attributes_are_no_longer_saved(tmp_path):
    ckpt = md.train.Checkpoint(a=md.Variable(1.0), b=md.Variable(2.0))
    del ckpt.b
    ckpt.write(str(tmp_path / "w"))
    assert md.train.list_variables(str(tmp_path / "w")) == [("a:value", [])]


def test_bad_paths_raise():
    ckpt = md.train.Checkpoint(v=md.Variable(1.0))
    with pytest.raises(TypeError, match="str or os.PathLike, got 3 of type int"):
        ckpt.save(3)
    with pytest.raises(ValueError, match="must not be empty"):
        ckpt.write("")


def test_a_keras_learning_rate_variable_is_saved_and_restored(tmp_path):
    opt = keras.optimizers.SGD(0.1)
    if not isinstance(opt.learning_rate, md.Variable):
        pytest.skip("this build's Keras optimizers keep the learning rate as a float")
    opt.learning_rate.assign(0.02)                       # e.g. ReduceLROnPlateau lowered it
    prefix = md.train.Checkpoint(opt=opt).write(str(tmp_path / "lr"))
    opt2 = keras.optimizers.SGD(0.1)
    md.train.Checkpoint(opt=opt2).read(prefix).assert_consumed()
    assert float(opt2.learning_rate) == pytest.approx(0.02)
