"""pytorch/examples programs as printed, each a function ``example(port) -> dict`` whose only changes are
the port's (``pytutorials_run.py``; runners in ``pyexamples2_run.py``): models and optimizers built in
``port.scope()``, the loop body in ``port.run``, the data through ``port.distribute``. Small synthetic data
instead of the downloads and gym, float64 (``.double()`` where the example calls ``.float()``):

* reinforcement_learning/reinforce.py and actor_critic.py: ``policy.saved_log_probs`` / ``saved_actions``
  and ``policy.rewards`` are lists on the module, filled by ``select_action`` during the episode and
  emptied by ``finish_episode`` (``del policy.rewards[:]``). One episode per replica (rank), from its
  own seed. On replicas the lists are one Python object for all (refused: a replica's loss reaches the
  other's tensors); ``*_per_replica`` keeps them per replica as the error says;
* vae/main.py: ``reparameterize``'s ``torch.randn_like`` in the step, ``loss_function`` summed
  (``reduction='sum'``), the epoch's loss divided by the dataset's length, ``test`` and ``sample``;
* super_resolution: ``PixelShuffle``, ``init.orthogonal_``, Adam, PSNR from ``mse.item()``; its checkpoint
  ``torch.save(model, path)`` (the whole module, pickled) loaded with ``torch.load`` by super_resolve.py,
  or (``super_resolution_state_dict``) ``state_dict()`` loaded into a network built anew.

This module imports only torch (and numpy): the DDP runner must not import multidev.
"""
from __future__ import annotations

import math
import os
import tempfile
from collections import deque, namedtuple

import numpy as np
import torch
from torch import nn, optim
from torch.distributions import Categorical
from torch.nn import functional as F
from torch.nn import init
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- reinforcement_learning: reinforce.py, actor_critic.py ---------------------------------------------------
class CartPole:
    """gym's CartPole-v1 (Euler steps, reward 1 a step), a few steps long; ``reset(seed=)`` as gymnasium."""

    def __init__(self, max_steps=8):
        self.max_steps = max_steps

    def reset(self, seed):
        self.state, self.t = np.random.default_rng(seed).uniform(-0.05, 0.05, size=4), 0
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


class Policy(nn.Module):   # reinforce.py
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 16)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(16, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class ActorCritic(nn.Module):   # actor_critic.py's Policy
    def __init__(self):
        super(ActorCritic, self).__init__()
        self.affine1 = nn.Linear(4, 16)
        self.action_head = nn.Linear(16, 2)   # actor's layer
        self.value_head = nn.Linear(16, 1)   # critic's layer
        self.saved_actions = []   # action & reward buffer
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


eps = np.finfo(np.float32).eps.item()
GAMMA = 0.99


class _Lists:
    """The lists the examples keep on the module, as printed (``per_replica=False``: ``policy.rewards``)
    or one set per replica (rank), keyed by its index: the fix multidev's refusal names."""

    def __init__(self, port, policy, names, per_replica):
        self.port, self.policy, self.names, self.per_replica = port, policy, names, per_replica
        if per_replica:
            for name in names:
                setattr(policy, name, {})

    def __getattr__(self, name):
        value = getattr(self.policy, name)
        return value.setdefault(self.port.replica_id(), []) if self.per_replica else value


def reinforce(port, per_replica=False) -> dict:
    torch.manual_seed(543)
    with port.scope():
        policy = Policy().double()
        optimizer = optim.Adam(policy.parameters(), lr=1e-2)
    model = port.wrap(policy)
    lists = _Lists(port, policy, ("saved_log_probs", "rewards"), per_replica)

    def select_action(state):
        state = torch.from_numpy(state).double().unsqueeze(0)
        probs = model(state)
        m = Categorical(probs)
        action = m.sample()
        lists.saved_log_probs.append(m.log_prob(action))
        return action.item()

    def finish_episode():
        R = 0
        policy_loss = []
        returns = deque()
        for r in lists.rewards[::-1]:
            R = r + GAMMA * R
            returns.appendleft(R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for log_prob, R in zip(lists.saved_log_probs, returns):
            policy_loss.append(-log_prob * R)
        optimizer.zero_grad()
        policy_loss = torch.cat(policy_loss).sum()
        policy_loss.backward()
        optimizer.step()
        del lists.rewards[:]
        del lists.saved_log_probs[:]
        return policy_loss.detach()

    return _episodes(port, _episode(select_action, finish_episode, lists), model)


def _episode(select_action, finish_episode, lists):
    """main()'s loop body: one episode (``policy.rewards.append(reward)`` each step), then finish_episode()."""
    def episode(seed):
        env = CartPole()
        state, _ = env.reset(seed=int(seed))
        ep_reward = 0
        for t in range(1, 10000):
            action = select_action(state)
            state, reward, terminated, truncated, _ = env.step(action)
            lists.rewards.append(reward)
            ep_reward += reward
            if terminated or truncated:
                break
        return torch.tensor(ep_reward), finish_episode()
    return episode


def _episodes(port, episode, model) -> dict:
    """main()'s loop: 3 rounds of one episode per replica (rank), each from its own seed; the running
    reward of the episodes' mean."""
    running_reward, log = 10, []
    seeds = DataLoader(TensorDataset(torch.arange(6)), batch_size=2)
    for (seed,) in port.distribute(seeds):
        ep_reward, loss = port.run(episode, args=(seed,))
        running_reward = 0.05 * port.mean(ep_reward) + (1 - 0.05) * running_reward
        log += [running_reward, port.mean(loss)]
    return {**port.weights(model), "log": log}


def actor_critic(port, per_replica=False) -> dict:
    torch.manual_seed(543)
    with port.scope():
        net = ActorCritic().double()
        optimizer = optim.Adam(net.parameters(), lr=3e-2)
    model = port.wrap(net)
    lists = _Lists(port, net, ("saved_actions", "rewards"), per_replica)

    def select_action(state):
        state = torch.from_numpy(state).double()
        probs, state_value = model(state)
        m = Categorical(probs)   # create a categorical distribution over the list of probabilities of actions
        action = m.sample()   # and sample an action using the distribution
        lists.saved_actions.append(SavedAction(m.log_prob(action), state_value))   # save to action buffer
        return action.item()

    def finish_episode():
        R = 0
        saved_actions = lists.saved_actions
        policy_losses, value_losses, returns = [], [], []
        for r in lists.rewards[::-1]:   # calculate the true value using rewards returned from the environment
            R = r + GAMMA * R
            returns.insert(0, R)
        returns = torch.tensor(returns, dtype=F64)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for (log_prob, value), R in zip(saved_actions, returns):
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage)   # actor (policy) loss
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R], dtype=F64)))   # critic (value) loss
        optimizer.zero_grad()
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
        loss.backward()
        optimizer.step()
        del lists.rewards[:]
        del lists.saved_actions[:]
        return loss.detach()

    return _episodes(port, _episode(select_action, finish_episode, lists), model)


# --- vae/main.py ------------------------------------------------------------------------------------------------
PIX, HID, LAT = 16, 8, 2   # 784, 400, 20 in the example


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(PIX, HID)
        self.fc21 = nn.Linear(HID, LAT)
        self.fc22 = nn.Linear(HID, LAT)
        self.fc3 = nn.Linear(LAT, HID)
        self.fc4 = nn.Linear(HID, PIX)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, PIX))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    """Reconstruction + KL divergence losses summed over all elements and batch."""
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, PIX), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def _pixels(seed, n):
    return TensorDataset(torch.rand(n, 1, 4, 4, generator=_gen(seed), dtype=F64), torch.zeros(n, dtype=torch.int64))


def vae(port) -> dict:
    torch.manual_seed(1)
    train_loader = DataLoader(_pixels(70, 24), batch_size=8, shuffle=True)
    test_loader = DataLoader(_pixels(71, 8), batch_size=4)
    with port.scope():
        net = VAE().double()
        optimizer = optim.Adam(net.parameters(), lr=1e-2)
    model = port.wrap(net)

    def train_step(data):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = []
    for epoch in range(1, 3):
        model.train()
        train_loss = 0
        for batch_idx, (data, _) in enumerate(port.distribute(train_loader)):
            train_loss += port.sum(port.run(train_step, args=(data,)))
        log.append(train_loss / len(train_loader.dataset))   # '====> Epoch: {} Average loss: {:.4f}'
        model.eval()   # test(epoch): every process the whole test set, outside the step
        test_loss = 0
        with torch.no_grad():
            for i, (data, _) in enumerate(test_loader):
                recon_batch, mu, logvar = model(data)
                test_loss += loss_function(recon_batch, data, mu, logvar).item()
            sample = torch.randn(4, LAT, dtype=F64)
            sample = net.decode(sample)
        log += [test_loss / len(test_loader.dataset), float(sample.sum())]
    return {**port.weights(model), "log": log}


# --- super_resolution -----------------------------------------------------------------------------------------
class SuperResolutionNet(nn.Module):
    def __init__(self, upscale_factor):
        super(SuperResolutionNet, self).__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 8, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(8, 8, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(8, 4, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(4, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


def _low_high(seed, n):
    """Targets 8x8, inputs their 2x average-pooled 4x4 (the example's resized crops)."""
    high = torch.rand(n, 1, 8, 8, generator=_gen(seed), dtype=F64)
    return TensorDataset(F.avg_pool2d(high, 2), high)


def super_resolution(port, whole_module=True) -> dict:
    """``whole_module=False``: the checkpoint is ``model.state_dict()``, loaded into a network built anew."""
    torch.manual_seed(123)
    training_data_loader = DataLoader(_low_high(72, 16), batch_size=4, shuffle=True)
    testing_data_loader = DataLoader(_low_high(73, 8), batch_size=4)
    with port.scope():
        model = SuperResolutionNet(upscale_factor=2).double()
        criterion = nn.MSELoss()
        optimizer = optim.Adam(model.parameters(), lr=0.01)
    net = port.wrap(model)

    def train_step(input, target):
        optimizer.zero_grad()
        loss = criterion(net(input), target)
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = []
    with tempfile.TemporaryDirectory() as tmp:
        for epoch in range(1, 3):
            epoch_loss = 0
            for iteration, (input, target) in enumerate(port.distribute(training_data_loader), 1):
                epoch_loss += port.mean(port.run(train_step, args=(input, target)))
            avg_psnr = 0
            with torch.no_grad():   # test(): outside the step
                for input, target in testing_data_loader:
                    mse = criterion(model(input), target)
                    psnr = 10 * math.log10(1 / mse.item())
                    avg_psnr += psnr
            model_out_path = os.path.join(tmp, "model_epoch_{}.pth".format(epoch))
            if whole_module:
                torch.save(port.module(net), model_out_path)   # checkpoint(): the whole module
            else:
                torch.save(port.module(net).state_dict(), model_out_path)
            log += [epoch_loss / len(training_data_loader), avg_psnr / len(testing_data_loader)]
        if whole_module:
            loaded = torch.load(model_out_path, weights_only=False)   # super_resolve.py
        else:
            loaded = SuperResolutionNet(upscale_factor=2).double()
            loaded.load_state_dict(torch.load(model_out_path, weights_only=True))
        with torch.no_grad():
            log.append(float(loaded(testing_data_loader.dataset.tensors[0]).sum()))
    return {**port.weights(net), "log": log}


EXAMPLES = {"reinforce": reinforce, "reinforce_per_replica": lambda port: reinforce(port, per_replica=True),
            "actor_critic": actor_critic, "actor_critic_per_replica": lambda port: actor_critic(port, per_replica=True),
            "vae": vae, "super_resolution": super_resolution,
            "super_resolution_state_dict": lambda port: super_resolution(port, whole_module=False)}
