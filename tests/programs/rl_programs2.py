"""cleanrl's ``sac_continuous_action.py`` and first-order meta-learning (Reptile, first-order MAML) on
sine-wave regression, ported with two lines, each replica (rank) with its own environment, replay buffer
or tasks (see ``rl_programs.py``):

* SAC: two Q-networks, their targets' polyak update through ``.data``, the actor updated every
  ``policy_frequency`` steps, entropy autotuning with ``log_alpha = torch.zeros(1, requires_grad=True)``
  and its own Adam (as printed, and ported: ``md.Variable`` / the gradient averaged by hand under DDP);
* Reptile (OpenAI's sine-wave demo, batched as supervised-reptile) and first-order MAML: ``deepcopy(model)``
  per task in the step, inner SGD on the copy, the outer update written by hand (``p.grad = ...`` then the
  meta-optimizer's step, or ``p.data.add_(...)``).

Float64. Imports only torch and numpy: the DDP runner must not import multidev.
"""
from __future__ import annotations

from copy import deepcopy

import numpy as np
import torch
from torch import nn, optim
from torch.distributions.normal import Normal
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64


# --- cleanrl sac_continuous_action.py ---
class Pendulum:
    """gym's Pendulum-v1 dynamics, ``max_steps`` long; ``action_space.sample()`` from its generator."""

    def __init__(self, max_steps=5):
        self.max_steps = max_steps

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.state, self.t = self.rng.uniform([-np.pi, -1.0], [np.pi, 1.0]), 0
        return self._obs(), {}

    def _obs(self):
        th, thdot = self.state
        return np.array([np.cos(th), np.sin(th), thdot])

    def sample(self):
        return self.rng.uniform(-2.0, 2.0, size=(1,))

    def step(self, u):
        th, thdot = self.state
        u = float(np.clip(u, -2.0, 2.0)[0])
        costs = (((th + np.pi) % (2 * np.pi)) - np.pi) ** 2 + 0.1 * thdot ** 2 + 0.001 * u ** 2
        newthdot = np.clip(thdot + (3 * 10.0 / 2 * np.sin(th) + 3.0 * u) * 0.05, -8.0, 8.0)
        self.state, self.t = np.array([th + newthdot * 0.05, newthdot]), self.t + 1
        return self._obs(), -costs, False, self.t >= self.max_steps, {}


class SoftQNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3 + 1, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 1)

    def forward(self, x, a):
        x = torch.cat([x, a], 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


LOG_STD_MAX, LOG_STD_MIN = 2, -5


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc_mean = nn.Linear(16, 1)
        self.fc_logstd = nn.Linear(16, 1)
        self.register_buffer("action_scale", torch.tensor([2.0], dtype=torch.float32))
        self.register_buffer("action_bias", torch.tensor([0.0], dtype=torch.float32))

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        mean = self.fc_mean(x)
        log_std = self.fc_logstd(x)
        log_std = torch.tanh(log_std)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)
        return mean, log_std

    def get_action(self, x):
        mean, log_std = self(x)
        std = log_std.exp()
        normal = Normal(mean, std)
        x_t = normal.rsample()
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
        log_prob = log_prob.sum(1, keepdim=True)
        mean = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob, mean


class SacArgs:
    total_timesteps, learning_starts, batch_size = 14, 6, 4
    gamma, tau, policy_lr, q_lr = 0.99, 0.005, 3e-3, 1e-2
    policy_frequency, target_network_frequency = 2, 1


def sac(port, log_alpha_port=False, targets_in_scope=True, alpha_local=None) -> dict:
    """``log_alpha_port``: ``log_alpha = port.free_variable(torch.zeros(1))`` (``md.Variable`` on multidev,
    its gradient averaged by hand under DDP) instead of the free tensor as printed, and ``alpha`` read from it
    in the step instead of the enclosing function's number the update writes."""
    args = SacArgs
    np.random.seed(1)
    torch.manual_seed(1)
    with port.scope():
        actor = Actor().double()
        qf1, qf2 = SoftQNetwork().double(), SoftQNetwork().double()
        q_optimizer = optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=args.q_lr)
        actor_optimizer = optim.Adam(list(actor.parameters()), lr=args.policy_lr)
        target_entropy = -1.0
        if log_alpha_port:
            log_alpha = port.free_variable(torch.zeros(1, dtype=F64))
        else:
            log_alpha = torch.zeros(1, requires_grad=True, dtype=F64)
        alpha = log_alpha.exp().item()
        a_optimizer = optim.Adam([log_alpha], lr=args.q_lr)
        if targets_in_scope:
            qf1_target, qf2_target = SoftQNetwork().double(), SoftQNetwork().double()
    if not targets_in_scope:
        qf1_target, qf2_target = SoftQNetwork().double(), SoftQNetwork().double()
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    states = {}

    def step_as_printed(global_step):   # cleanrl's global ``alpha``, written by the update
        nonlocal alpha
        logged, alpha = global_step_fn(global_step, alpha)
        return logged

    def step_alpha_local(global_step):   # the port: read from ``log_alpha`` where the step uses it
        return global_step_fn(global_step, log_alpha.exp().item())[0]

    def global_step_fn(global_step, alpha):
        rank = port.replica_id()
        if rank not in states:
            env = Pendulum()
            obs, _ = env.reset(seed=1 + 10 * rank)
            states[rank] = {"env": env, "obs": obs, "rb": []}
        st = states[rank]
        env, obs, rb = st["env"], st["obs"], st["rb"]
        if global_step < args.learning_starts:
            actions = env.sample()
        else:
            actions, _, _ = actor.get_action(torch.tensor(obs[None], dtype=F64))
            actions = actions[0].detach().cpu().numpy()
        next_obs, rewards, terminations, truncations, infos = env.step(actions)
        rb.append((obs, next_obs, actions, rewards, terminations))
        st["obs"] = env.reset()[0] if truncations else next_obs
        logged = [0.0, 0.0, alpha]
        if global_step > args.learning_starts:
            idx = np.random.randint(0, len(rb), size=args.batch_size)
            o, no, a, r, d = (torch.tensor(np.array([rb[i][k] for i in idx]), dtype=F64) for k in range(5))
            with torch.no_grad():
                next_state_actions, next_state_log_pi, _ = actor.get_action(no)
                qf1_next_target = qf1_target(no, next_state_actions)
                qf2_next_target = qf2_target(no, next_state_actions)
                min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) - alpha * next_state_log_pi
                next_q_value = r.flatten() + (1 - d.flatten()) * args.gamma * (min_qf_next_target).view(-1)
            qf1_a_values = qf1(o, a).view(-1)
            qf2_a_values = qf2(o, a).view(-1)
            qf1_loss = F.mse_loss(qf1_a_values, next_q_value)
            qf2_loss = F.mse_loss(qf2_a_values, next_q_value)
            qf_loss = qf1_loss + qf2_loss
            q_optimizer.zero_grad()
            qf_loss.backward()
            port.average_gradients(list(qf1.parameters()) + list(qf2.parameters()))
            q_optimizer.step()
            logged[0] = qf_loss.item()
            if global_step % args.policy_frequency == 0:
                for _ in range(args.policy_frequency):
                    pi, log_pi, _ = actor.get_action(o)
                    qf1_pi = qf1(o, pi)
                    qf2_pi = qf2(o, pi)
                    min_qf_pi = torch.min(qf1_pi, qf2_pi)
                    actor_loss = ((alpha * log_pi) - min_qf_pi).mean()
                    actor_optimizer.zero_grad()
                    actor_loss.backward()
                    port.average_gradients(actor.parameters())
                    actor_optimizer.step()
                    with torch.no_grad():
                        _, log_pi, _ = actor.get_action(o)
                    alpha_loss = (-log_alpha.exp() * (log_pi + target_entropy)).mean()
                    a_optimizer.zero_grad()
                    alpha_loss.backward()
                    if log_alpha_port:
                        port.average_gradients([log_alpha])
                    a_optimizer.step()
                    alpha = log_alpha.exp().item()
                logged[1] = actor_loss.item()
            if global_step % args.target_network_frequency == 0:
                for param, target_param in zip(qf1.parameters(), qf1_target.parameters()):
                    target_param.data.copy_(args.tau * param.data + (1 - args.tau) * target_param.data)
                for param, target_param in zip(qf2.parameters(), qf2_target.parameters()):
                    target_param.data.copy_(args.tau * param.data + (1 - args.tau) * target_param.data)
        logged[2] = alpha
        return tuple(torch.tensor(float(x), dtype=F64) for x in logged), alpha

    log = []
    for global_step in range(args.total_timesteps):
        step = step_alpha_local if (log_alpha_port if alpha_local is None else alpha_local) else step_as_printed
        log.append([port.mean(x) for x in port.run(step, args=(global_step,))])
    return {**port.weights(actor, qf1, qf2, qf1_target, qf2_target), "log": log}


# --- Reptile (OpenAI's sine-wave demo, a meta-batch as supervised-reptile) and first-order MAML ---
def gen_task(task_id):
    rng = np.random.default_rng(int(task_id))
    phase, ampl = rng.uniform(low=0, high=2 * np.pi), rng.uniform(0.1, 5)
    return lambda x: ampl * np.sin(x + phase)


def totorch(x):
    return torch.tensor(x, dtype=F64)


META_BATCH, ITERATIONS, INNER_STEPS = 4, 3, 2
x_all = np.linspace(-5, 5, 10)[:, None]


def _tasks():
    return DataLoader(TensorDataset(torch.arange(META_BATCH * ITERATIONS)), batch_size=META_BATCH)


def meta(port, first_order_maml=False, write_data=False) -> dict:
    """Each replica (rank) adapts a ``deepcopy(model)`` per task of its share; the outer update is
    ``p.grad = ...`` summed over the tasks (``/ META_BATCH``) then ``meta_optimizer.step()``, its gradients
    summed over the ranks by hand under DDP; ``write_data``: Reptile's ``p.data.add_(...)`` instead."""
    torch.manual_seed(0)
    with port.scope():
        model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)).double()
        meta_optimizer = optim.SGD(model.parameters(), lr=0.5 if not first_order_maml else 0.05)
    innerstepsize = 0.02

    def train_on_task(task_ids):
        meta_optimizer.zero_grad()
        losses = []
        for task_id in task_ids:
            f = gen_task(task_id)
            learner = deepcopy(model)
            inner_opt = optim.SGD(learner.parameters(), lr=innerstepsize)
            for _ in range(INNER_STEPS):
                ypred = learner(totorch(x_all[::2]))
                loss = (ypred - totorch(f(x_all[::2]))).pow(2).mean()
                inner_opt.zero_grad()
                loss.backward()
                inner_opt.step()
            if first_order_maml:
                inner_opt.zero_grad()
                loss = (learner(totorch(x_all[1::2])) - totorch(f(x_all[1::2]))).pow(2).mean()
                loss.backward()
            losses.append(loss.item())
            for p, lp in zip(model.parameters(), learner.parameters()):
                if write_data:
                    p.data.add_((lp.data - p.data) / META_BATCH)
                    continue
                g = (lp.grad if first_order_maml else p.data - lp.data) / META_BATCH
                p.grad = g if p.grad is None else p.grad + g
        if not write_data:
            port.sum_gradients(model.parameters())
            meta_optimizer.step()
        return torch.tensor(float(np.mean(losses)), dtype=F64)

    log = [port.mean(port.run(train_on_task, args=(ids,))) for (ids,) in port.distribute(_tasks())]
    return {**port.weights(model), "log": log}


RL2 = {
    "sac_as_printed": sac,
    "sac_md_variable": lambda port: sac(port, log_alpha_port=True),
    "sac_free_log_alpha": lambda port: sac(port, alpha_local=True),
    "sac_targets_outside_scope": lambda port: sac(port, log_alpha_port=True, targets_in_scope=False),
    "reptile_grad": meta,
    "reptile_data": lambda port: meta(port, write_data=True),
    "fomaml_grad": lambda port: meta(port, first_order_maml=True),
}
