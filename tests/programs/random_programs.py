"""Random ops in the forward pass, as public programs print them, ported with two lines (model and optimizer
built in ``strategy.scope()``, the loop body in ``strategy.run`` over ``experimental_distribute_dataset``):

* timm's ``drop_path`` (stochastic depth: ``x.new_empty(shape).bernoulli_(keep_prob)``, ``div_(keep_prob)``)
  and torchvision's ``ops.stochastic_depth`` (``torch.empty(size).bernoulli_(survival_rate)``) as printed;
* ``F.gumbel_softmax(logits, tau, hard=True)`` (a discrete latent), ``torch.multinomial`` sampling actions
  for REINFORCE, Hugging Face's MLM masking (``torch.bernoulli`` of 0.15 / 0.8 / 0.5, ``torch.randint``
  random words) in the step, ``x + torch.randn_like(x) * sigma`` noise, ``torch.distributions`` ``rsample``
  (a VAE's ``Normal``, a ``Beta``).

Each is ``case(port) -> dict`` over ``random_run``'s ports (a DDP rank, or a strategy's port). Float64,
synthetic seeded data, global batch 8, every process seeded alike. Imports only torch: the DDP runner must
not import multidev.
"""
from __future__ import annotations

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, STEPS, WIDTH = 8, 4, 6


def _data(seed: int, classes: int = 3, steps: int = STEPS) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps * GLOBAL_BATCH, WIDTH, generator=g, dtype=F64)
    y = torch.randint(0, classes, (steps * GLOBAL_BATCH,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH)


def _train(port, model, step_loss, seed: int = 5, lr: float = 0.1, data=None) -> dict:
    """The loop every case shares: SGD on ``step_loss(model, x, y)``, the loss logged per step."""
    model = port.wrap(model)

    def step(*batch):
        optimizer.zero_grad()
        loss = step_loss(model, *batch)
        loss.backward()
        optimizer.step()
        return loss.detach()

    with port.scope():
        optimizer = optim.SGD(port.module(model).parameters(), lr=lr, momentum=0.9)
    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(data or _data(seed))]
    return {**port.weights(model), "log": log}


# --- timm's drop_path / DropPath (timm/layers/drop.py) and torchvision.ops.stochastic_depth, as printed -------
def drop_path(x, drop_prob: float = 0., training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)  # work with diff dim tensors, not just 2D ConvNets
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob: float = 0., scale_by_keep: bool = True):
        super().__init__()
        self.drop_prob, self.scale_by_keep = drop_prob, scale_by_keep

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)


def stochastic_depth(input, p: float, mode: str, training: bool = True):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
    if mode not in ["batch", "row"]:
        raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
    if not training or p == 0.0:
        return input
    survival_rate = 1.0 - p
    if mode == "row":
        size = [input.shape[0]] + [1] * (input.ndim - 1)
    else:
        size = [1] * input.ndim
    noise = torch.empty(size, dtype=input.dtype, device=input.device)
    noise = noise.bernoulli_(survival_rate)
    if survival_rate > 0.0:
        noise.div_(survival_rate)
    return input * noise


class ResidualNet(nn.Module):
    """Two residual blocks whose branch is dropped per sample (timm) or per row/batch (torchvision)."""

    def __init__(self, drop):
        super().__init__()
        self.inp = nn.Linear(WIDTH, 8)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(2)])
        self.drop, self.head = drop, nn.Linear(8, 3)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = x + self.drop(block(x), self.training)
        return self.head(x)


def _cross_entropy(model, x, y):
    return F.cross_entropy(model(x), y)


def drop_path_timm(port) -> dict:
    torch.manual_seed(11)
    with port.scope():
        model = ResidualNet(lambda h, training: drop_path(h, 0.4, training)).double()
    return _train(port, model, _cross_entropy)


def drop_path_module(port) -> dict:
    """timm's blocks hold ``self.drop_path = DropPath(p)`` and call it on the branch."""
    torch.manual_seed(19)
    with port.scope():
        drop = DropPath(0.4)
        model = ResidualNet(lambda h, training: drop(h)).double()
        model.drop_path = drop   # (a submodule: model.train() reaches it)
    return _train(port, model, _cross_entropy)


def stochastic_depth_row(port) -> dict:
    torch.manual_seed(12)
    with port.scope():
        model = ResidualNet(lambda h, training: stochastic_depth(h, 0.5, "row", training)).double()
    return _train(port, model, _cross_entropy)


def stochastic_depth_batch(port) -> dict:
    torch.manual_seed(13)
    with port.scope():
        model = ResidualNet(lambda h, training: stochastic_depth(h, 0.5, "batch", training)).double()
    return _train(port, model, _cross_entropy)


# --- a discrete latent through F.gumbel_softmax(hard=True) (straight-through) -------------------------------
class GumbelAutoencoder(nn.Module):
    def __init__(self, codes: int = 5, tau: float = 0.7):
        super().__init__()
        self.enc, self.dec, self.tau = nn.Linear(WIDTH, codes), nn.Linear(codes, WIDTH), tau

    def forward(self, x):
        z = F.gumbel_softmax(self.enc(x), tau=self.tau, hard=True)
        return self.dec(z)


def gumbel_softmax_hard(port) -> dict:
    torch.manual_seed(14)
    with port.scope():
        model = GumbelAutoencoder().double()
    return _train(port, model, lambda m, x, y: F.mse_loss(m(x), x))


# --- REINFORCE with torch.multinomial (and Categorical.sample) ----------------------------------------------
def reinforce_multinomial(port) -> dict:
    torch.manual_seed(15)
    with port.scope():
        policy = nn.Sequential(nn.Linear(WIDTH, 8), nn.Tanh(), nn.Linear(8, 3)).double()

    def loss(model, x, y):
        probs = F.softmax(model(x), dim=-1)
        actions = torch.multinomial(probs, 1).squeeze(1)
        second = torch.distributions.Categorical(probs=probs).sample()
        reward = (actions == y).double() + 0.5 * (second == y).double()
        log_prob = torch.log(probs.gather(1, actions[:, None]).squeeze(1))
        return -(log_prob * (reward - reward.mean())).mean()

    return _train(port, policy, loss)


# --- Hugging Face DataCollatorForLanguageModeling.torch_mask_tokens, run in the step ------------------------
VOCAB, MASK_ID, SEQ = 20, 1, 7


def mask_tokens(inputs, mlm_probability: float = 0.15):
    labels = inputs.clone()
    probability_matrix = torch.full(labels.shape, mlm_probability)
    masked_indices = torch.bernoulli(probability_matrix).bool()
    labels[~masked_indices] = -100  # We only compute loss on masked tokens
    indices_replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & masked_indices
    inputs[indices_replaced] = MASK_ID
    indices_random = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked_indices & ~indices_replaced
    random_words = torch.randint(VOCAB, labels.shape, dtype=torch.long)
    inputs[indices_random] = random_words[indices_random]
    return inputs, labels


class TinyMLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.mix, self.out = nn.Embedding(VOCAB, 8), nn.Linear(8, 8), nn.Linear(8, VOCAB)

    def forward(self, ids):
        h = self.emb(ids)
        return self.out(torch.tanh(self.mix(h + h.mean(1, keepdim=True))))


def bert_mlm_masking(port) -> dict:
    torch.manual_seed(16)
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(2, VOCAB, (STEPS * GLOBAL_BATCH, SEQ), generator=g)
    data = DataLoader(TensorDataset(tokens), batch_size=GLOBAL_BATCH)
    with port.scope():
        model = TinyMLM().double()

    def loss(m, ids):
        inputs, labels = mask_tokens(ids.clone(), mlm_probability=0.3)
        logits = m(inputs)
        return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100,
                               reduction="sum") / ids.numel()

    return _train(port, model, loss, lr=0.5, data=data)


# --- noise augmentation and torch.distributions' rsample -----------------------------------------------------
def gaussian_noise_augmentation(port) -> dict:
    torch.manual_seed(17)
    sigma = 0.3
    with port.scope():
        model = nn.Sequential(nn.Linear(WIDTH, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 3)).double()

    def loss(m, x, y):
        noise = torch.randn_like(x) * sigma
        return F.cross_entropy(m(x + noise), y)

    return _train(port, model, loss)


class VAE(nn.Module):
    def __init__(self, latent: int = 2):
        super().__init__()
        self.enc, self.dec = nn.Linear(WIDTH, 2 * latent), nn.Linear(latent, WIDTH)
        self.gate = nn.Linear(WIDTH, 2)

    def forward(self, x):
        mu, log_var = self.enc(x).chunk(2, dim=-1)
        q = torch.distributions.Normal(mu, torch.exp(0.5 * log_var))
        z = q.rsample()
        kl = torch.distributions.kl_divergence(q, torch.distributions.Normal(0.0, 1.0)).sum(-1)
        a, b = F.softplus(self.gate(x)).unbind(-1)
        w = torch.distributions.Beta(a + 0.5, b + 0.5).rsample()   # (a Dirichlet draw underneath)
        return self.dec(z) * w[:, None], kl


def vae_rsample(port) -> dict:
    torch.manual_seed(18)
    with port.scope():
        model = VAE().double()

    def loss(m, x, y):
        recon, kl = m(x)
        return F.mse_loss(recon, x, reduction="none").sum(-1).mean() + kl.mean()

    return _train(port, model, loss, lr=0.05)


RANDOM = {f.__name__: f for f in (drop_path_timm, drop_path_module, stochastic_depth_row, stochastic_depth_batch,
                                   gumbel_softmax_hard, reinforce_multinomial, bert_mlm_masking,
                                   gaussian_noise_augmentation, vae_rsample)}
