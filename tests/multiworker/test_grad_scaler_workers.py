"""``GradScaler`` on MultiWorkerMirroredStrategy: the inf check agrees across workers, not only
across a worker's replicas. Gradients set by hand are not reduced by backward (the optimizer step
sums them), so an inf in the last worker's only must still make every worker skip and back the
scale off; otherwise the workers that stepped would meet the others' next step's all-reduce."""

import pytest

from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

BODY = """
import json, math, torch, multidev as md
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(timeout_seconds=20))
with strategy.scope():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=1)
start = model.weight.values[0].detach().clone()

def by_hand(bad):
    scaler.scale(torch.zeros((), dtype=torch.float64))
    last = md.distribute.get_replica_context().replica_id_in_sync_group.item() == strategy.num_replicas_in_sync - 1
    for p in model.parameters():
        p.grad = torch.full_like(p, math.inf if bad and last else scaler.get_scale())
    scaler.step(opt)
    scaler.update()
    return torch.tensor(scaler.get_scale())

scales = [[float(v) for v in strategy.experimental_local_results(strategy.run(by_hand, args=(bad,)))]
          for bad in (True, False)]
moved = [(c.detach() - start).tolist() for c in model.weight.values]
print("RESULT " + json.dumps({"scales": scales, "moved": moved}))
"""


@pytest.mark.parametrize("local_replicas", [1, 2])
def test_an_inf_on_one_worker_skips_every_worker(local_replicas):
    procs = run_cluster(BODY, workers=2, timeout=100, env={"MULTIDEV_LOGICAL_CPUS": str(local_replicas)})
    for result in (results_json(p) for p in procs):
        # skipped (scale 1024 -> 512), then stepped (512 -> 1024) with the sum of every replica's 1.0
        assert result["scales"] == [[512.0] * local_replicas, [1024.0] * local_replicas], result
        moved = [x for copy in result["moved"] for row in copy for x in row]
        assert moved == pytest.approx([-0.1 * 2 * local_replicas] * 3 * local_replicas, abs=1e-12), result
