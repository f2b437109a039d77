"""pytorch.org/tutorials' reinforcement-learning and language-modeling tutorials as printed, with
the port's changes only (``pytutorials.py`` says which; runners in ``pytutorials_run.py``), float64:

* "Reinforcement Learning (DQN)": ``ReplayMemory`` sampled with ``random.sample`` in ``optimize_model``
  (in ``port.run``), ``SmoothL1Loss``, ``clip_grad_value_(policy_net.parameters(), 100)``, AdamW with
  amsgrad, ``target_net.load_state_dict(policy_net.state_dict())`` and the soft update through state
  dicts after every step (outside ``port.run``, and inside it with ``optimize_model``), a small
  synthetic environment instead of gym's CartPole;
* "Language Modeling with nn.Transformer": ``batchify`` / ``get_batch`` (sequence-first: the port hands
  each batch over batch-first, ``.t()``, and the step turns it back), ``generate_square_subsequent_mask``,
  ``clip_grad_norm_(0.5)``, ``StepLR``, ``evaluate`` and the best model's state dict saved and loaded.

This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import math
import os
import random
import tempfile
from collections import deque, namedtuple

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader

from pytutorials import F64, _gen



# --- Reinforcement Learning (DQN) -------------------------------------------------------------------------
Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory:
    def __init__(self, capacity):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        """Save a transition"""
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):
    def __init__(self, n_observations, n_actions):
        super().__init__()
        self.layer1 = nn.Linear(n_observations, 16)
        self.layer2 = nn.Linear(16, 16)
        self.layer3 = nn.Linear(16, n_actions)

    def forward(self, x):
        x = F.relu(self.layer1(x))
        x = F.relu(self.layer2(x))
        return self.layer3(x)


class LineWorld:
    """Stands for CartPole: a cart pushed left or right, ended when it leaves [-1, 1], truncated at 12."""

    def __init__(self):
        self.rng = random.Random(5)

    def reset(self):
        self.t, self.state = 0, [self.rng.uniform(-0.2, 0.2), 0.0, 0.0, 0.0]
        return list(self.state), {}

    def step(self, action):
        x, v, _, _ = self.state
        v = 0.9 * v + (0.1 if action else -0.1) + self.rng.uniform(-0.05, 0.05)
        self.t, self.state = self.t + 1, [x + v, v, x * v, math.sin(3 * x)]
        terminated = abs(x + v) > 1.0
        return list(self.state), 1.0 - abs(x + v), terminated, self.t >= 12, {}


BATCH_SIZE, GAMMA, EPS_START, EPS_END, EPS_DECAY, TAU, LR = 8, 0.99, 0.9, 0.05, 20, 0.05, 1e-2


def _dqn(port, update_in_run: bool) -> dict:
    random.seed(3)
    torch.manual_seed(3)
    env = LineWorld()
    n_actions, n_observations = 2, 4
    with port.scope():
        policy_net = DQN(n_observations, n_actions).double()
        target_net = DQN(n_observations, n_actions).double()
        target_net.load_state_dict(policy_net.state_dict())
        optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
    policy = port.wrap(policy_net)
    memory = ReplayMemory(100)
    steps_done = 0

    def select_action(state):
        nonlocal steps_done
        sample = random.random()
        eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1. * steps_done / EPS_DECAY)
        steps_done += 1
        if sample > eps_threshold:
            with torch.no_grad():
                return policy(state).max(1).indices.view(1, 1)
        return torch.tensor([[env.rng.randrange(n_actions)]], dtype=torch.long)

    def optimize_model():
        if len(memory) < BATCH_SIZE:
            return torch.zeros((), dtype=F64)
        transitions = memory.sample(BATCH_SIZE)
        batch = Transition(*zip(*transitions))
        non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)), dtype=torch.bool)
        non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
        state_batch, action_batch = torch.cat(batch.state), torch.cat(batch.action)
        reward_batch = torch.cat(batch.reward)
        state_action_values = policy(state_batch).gather(1, action_batch)
        next_state_values = torch.zeros(BATCH_SIZE, dtype=F64)
        with torch.no_grad():
            next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
        expected_state_action_values = (next_state_values * GAMMA) + reward_batch
        criterion = nn.SmoothL1Loss()
        loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)   # In-place gradient clipping
        optimizer.step()
        return loss.detach()

    def soft_update():
        target_net_state_dict = target_net.state_dict()
        policy_net_state_dict = port.module(policy_net).state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = policy_net_state_dict[key] * TAU + target_net_state_dict[key] * (1 - TAU)
        target_net.load_state_dict(target_net_state_dict)

    def optimize_and_update():
        loss = optimize_model()
        soft_update()
        return loss

    log = []
    for i_episode in range(3):
        state, info = env.reset()
        state = torch.tensor(state, dtype=F64).unsqueeze(0)
        for t in range(100):
            action = select_action(state)
            observation, reward, terminated, truncated, _ = env.step(action.item())
            reward = torch.tensor([reward], dtype=F64)
            done = terminated or truncated
            next_state = None if terminated else torch.tensor(observation, dtype=F64).unsqueeze(0)
            memory.push(state, action, next_state, reward)   # Store the transition in memory
            state = next_state
            if update_in_run:
                log.append(port.mean(port.run(optimize_and_update)))
            else:
                log.append(port.mean(port.run(optimize_model)))
                soft_update()   # θ′ ← τ θ + (1 −τ )θ′
            if done:
                break
    return {**port.weights(policy, target_net), "log": log + [steps_done]}


def dqn(port) -> dict:
    return _dqn(port, update_in_run=False)


def dqn_update_in_run(port) -> dict:
    return _dqn(port, update_in_run=True)


# --- Language Modeling with nn.Transformer -----------------------------------------------------------------
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0)])


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.5):
        super().__init__()
        self.model_type = "Transformer"
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        encoder_layers = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers, enable_nested_tensor=False)
        self.encoder = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.decoder = nn.Linear(d_model, ntoken)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        self.encoder.weight.data.uniform_(-initrange, initrange)
        self.decoder.bias.data.zero_()
        self.decoder.weight.data.uniform_(-initrange, initrange)

    def forward(self, src, src_mask):
        src = self.encoder(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, src_mask)
        return self.decoder(output)


def generate_square_subsequent_mask(sz: int):
    """Generates an upper-triangular matrix of -inf, with zeros on diag."""
    return torch.triu(torch.ones(sz, sz, dtype=F64) * float("-inf"), diagonal=1)


def batchify(data, bsz: int):
    seq_len = data.size(0) // bsz
    data = data[:seq_len * bsz]
    return data.view(bsz, seq_len).t().contiguous()


BPTT, NTOKENS = 5, 16


def get_batch(source, i: int):
    seq_len = min(BPTT, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].reshape(-1)
    return data, target


def transformer_lm(port) -> dict:
    torch.manual_seed(4)
    corpus = torch.randint(0, NTOKENS, (4 * 23,), generator=_gen(70))
    train_data, val_data = batchify(corpus[:64], 4), batchify(corpus[64:], 2)   # [16, 4], [14, 2]
    # The port: each global batch batch-first (the strategy splits dimension 0), turned back in the step.
    batches = [get_batch(train_data, i) for i in range(0, train_data.size(0) - 1, BPTT)]
    loader = DataLoader([(d.t(), t.view(d.size(0), -1).t()) for d, t in batches], batch_size=None)
    with port.scope():
        net = TransformerModel(NTOKENS, 8, 2, 12, 2, dropout=0.2).double()
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(net.parameters(), lr=5.0)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)
    model = port.wrap(net)

    def train_step(data_t, targets_t):
        data, targets = data_t.t(), targets_t.t().reshape(-1)
        seq_len = data.size(0)
        src_mask = generate_square_subsequent_mask(BPTT)[:seq_len, :seq_len]
        output = model(data, src_mask)
        loss = criterion(output.view(-1, NTOKENS), targets)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        return loss.detach()

    def evaluate(eval_model, eval_data):
        eval_model.eval()   # turn on evaluation mode
        total_loss = 0.
        with torch.no_grad():
            for i in range(0, eval_data.size(0) - 1, BPTT):
                data, targets = get_batch(eval_data, i)
                output = eval_model(data, generate_square_subsequent_mask(data.size(0)))
                total_loss += data.size(0) * criterion(output.view(-1, NTOKENS), targets).item()
        return total_loss / (len(eval_data) - 1)

    best_val_loss, log = float("inf"), []
    with tempfile.TemporaryDirectory() as tempdir:
        best_model_params_path = os.path.join(tempdir, "best_model_params.pt")
        for epoch in range(1, 4):
            model.train()   # turn on train mode
            log += [port.mean(port.run(train_step, args=batch)) for batch in port.distribute(loader)]
            val_loss = evaluate(model, val_data)
            log += [val_loss, scheduler.get_last_lr()[0]]
            if val_loss < best_val_loss:
                best_val_loss = val_loss
                torch.save(model.state_dict(), best_model_params_path)
            scheduler.step()
        model.load_state_dict(torch.load(best_model_params_path, weights_only=True))   # load best model states
    return {**port.weights(model), "log": log + [evaluate(model, val_data)]}


TUTORIALS2 = {"dqn": dqn, "dqn_update_in_run": dqn_update_in_run, "transformer_lm": transformer_lm}
