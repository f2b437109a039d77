"""Reinforcement-learning programs as cleanrl prints them, ported with two lines (networks and optimizers in
``strategy.scope()``, the loop body in ``strategy.run``), each replica (rank) with its own environments and
replay buffer, keyed by its index (``port.replica_id()``), seeded by it:

* ``ppo.py``'s iteration: lr annealing ``optimizer.param_groups[0]["lr"] = lrnow``, the rollout under
  ``torch.no_grad()``, GAE, ``np.random.shuffle(b_inds)`` minibatch epochs, ``clip_grad_norm_``, the
  approx_kl / clipfrac logging with ``.item()``;
* ``sac_continuous_action.py`` (``rl_programs2.py``).

A DDP port reduces the gradients through the wrapper's ``forward``, or by hand as cleanrl's
``ppo_atari_multigpu.py`` does (``port.average_gradients``: a no-op on multidev, whose ``backward`` averages
them). Environments are
written here (gym's CartPole-v1 and Pendulum-v1 dynamics, a few steps). Float64. Imports only torch and
numpy: the DDP runner must not import multidev.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn, optim
from torch.distributions.categorical import Categorical
from torch.nn import functional as F

F64 = torch.float64


class CartPole:
    """gym's CartPole-v1 dynamics, ``max_steps`` long; its own generator (gymnasium's ``np_random``)."""

    def __init__(self, max_steps=6):
        self.max_steps, self.rng = max_steps, np.random.default_rng(0)

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.state, self.t = self.rng.uniform(-0.05, 0.05, size=4), 0
        return self.state, {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sintheta) / 1.1
        thetaacc = (9.8 * sintheta - costheta * temp) / (0.5 * (4.0 / 3.0 - 0.1 * costheta ** 2 / 1.1))
        xacc = temp - 0.05 * thetaacc * costheta / 1.1
        self.state = np.array([x + 0.02 * x_dot, x_dot + 0.02 * xacc, theta + 0.02 * theta_dot,
                               theta_dot + 0.02 * thetaacc])
        self.t += 1
        terminated = bool(abs(self.state[0]) > 2.4 or abs(self.state[2]) > 12 * 2 * math.pi / 360)
        return self.state, 1.0, terminated, self.t >= self.max_steps, {}


class SyncVectorEnv:
    """gymnasium's ``SyncVectorEnv`` with autoreset (an episode's end resets that env at once)."""

    def __init__(self, envs):
        self.envs = envs

    def reset(self, seed):
        return np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(self.envs)]), {}

    def step(self, actions):
        obs, rewards, terms, truncs = [], [], [], []
        for env, action in zip(self.envs, actions):
            o, r, term, trunc, _ = env.step(action)
            if term or trunc:
                o, _ = env.reset()
            obs.append(o), rewards.append(r), terms.append(term), truncs.append(trunc)
        return np.stack(obs), np.array(rewards), np.array(terms), np.array(truncs), {}


# --- cleanrl ppo.py ---
def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Sequential(layer_init(nn.Linear(4, 8)), nn.Tanh(), layer_init(nn.Linear(8, 8)), nn.Tanh(),
                                    layer_init(nn.Linear(8, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(4, 8)), nn.Tanh(), layer_init(nn.Linear(8, 8)), nn.Tanh(),
                                   layer_init(nn.Linear(8, 2), std=0.01))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)

    forward = get_action_and_value   # a DDP port calls the wrapper, so that its reducer sees the forward


class PpoArgs:
    learning_rate, num_envs, num_steps, num_iterations = 2.5e-3, 2, 8, 3
    gamma, gae_lambda, num_minibatches, update_epochs = 0.99, 0.95, 2, 2
    clip_coef, ent_coef, vf_coef, max_grad_norm = 0.2, 0.01, 0.5, 0.5
    batch_size, minibatch_size = 16, 8


def ppo(port, via_method=False, lr_in_step=False) -> dict:
    """``via_method``: ``agent.get_action_and_value(...)`` as printed, the gradients averaged by hand under
    DDP (``ppo_atari_multigpu.py``); otherwise through the DDP wrapper's ``forward``;
    ``lr_in_step``: the annealing line moved into the step."""
    args = PpoArgs
    np.random.seed(1)
    torch.manual_seed(1)
    with port.scope():
        agent = Agent().double()
        optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    model = port.wrap(agent)
    call = agent.get_action_and_value if via_method else model
    rollouts = {}

    def anneal(iteration):
        frac = 1.0 - (iteration - 1.0) / args.num_iterations
        lrnow = frac * args.learning_rate
        optimizer.param_groups[0]["lr"] = lrnow

    def iteration_step(iteration):
        if lr_in_step:
            anneal(iteration)
        rank = port.replica_id()
        if rank not in rollouts:
            envs = SyncVectorEnv([CartPole() for _ in range(args.num_envs)])
            next_obs, _ = envs.reset(seed=1 + 10 * rank)
            rollouts[rank] = [envs, torch.tensor(next_obs, dtype=F64), torch.zeros(args.num_envs, dtype=F64)]
        envs, next_obs, next_done = rollouts[rank]
        obs = torch.zeros((args.num_steps, args.num_envs, 4), dtype=F64)
        actions = torch.zeros((args.num_steps, args.num_envs), dtype=F64)
        logprobs, rewards, dones, values = (torch.zeros((args.num_steps, args.num_envs), dtype=F64) for _ in range(4))
        for step in range(0, args.num_steps):
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = call(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            next_done = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward, dtype=F64).view(-1)
            next_obs, next_done = torch.tensor(next_obs, dtype=F64), torch.tensor(next_done, dtype=F64)
        rollouts[rank][1:] = [next_obs, next_done]
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values
        b_obs = obs.reshape((-1, 4))
        b_logprobs, b_actions = logprobs.reshape(-1), actions.reshape(-1)
        b_advantages, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)
        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = b_inds[start:end]
                _, newlogprob, entropy, newvalue = call(b_obs[mb_inds], b_actions.long()[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]
                mb_advantages = b_advantages[mb_inds]
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()
                newvalue = newvalue.view(-1)
                v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -args.clip_coef,
                                                            args.clip_coef)
                v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                if via_method:   # cleanrl's multigpu port: no wrapper to reduce them, an all-reduce by hand
                    port.average_gradients(agent.parameters())
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        logged = (v_loss.item(), pg_loss.item(), entropy_loss.item(), old_approx_kl.item(), approx_kl.item(),
                  np.mean(clipfracs), explained_var, rewards.sum().item())
        return tuple(torch.tensor(float(x), dtype=F64) for x in logged)

    log = []
    for iteration in range(1, args.num_iterations + 1):
        if not lr_in_step:
            anneal(iteration)
        log.append([port.mean(x) for x in port.run(iteration_step, args=(iteration,))])
        log[-1].append(optimizer.param_groups[0]["lr"])
    return {**port.weights(agent), "log": log}


RL = {
    "ppo": ppo,
    "ppo_via_method": lambda port: ppo(port, via_method=True),
    "ppo_lr_in_step": lambda port: ppo(port, lr_in_step=True),
}
