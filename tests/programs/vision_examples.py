"""pytorch/examples' fast_neural_style and siamese_network training steps as ``Program``s, float64,
tiny:

* fast_neural_style (neural_style.py's ``train``): a transformer net (reflection padding, affine
  InstanceNorm, nearest upsampling) trained with Adam on a loss of a frozen VGG-like feature
  network (``Vgg16(requires_grad=False)``: every parameter's ``requires_grad = False``, built in
  the scope, never wrapped in DDP), content MSE on ``relu2_2`` plus the style MSE of Gram matrices
  against the style image's, computed once in ``build`` and sliced ``gm_s[:n_batch]``;
* siamese_network (main.py): two images through one network (``forward_once`` twice), the halves'
  features concatenated, ``Sigmoid`` and ``BCELoss``, Adadelta and a ``StepLR`` stepped per epoch,
  ``init_weights`` through ``apply`` with ``m.bias.data.fill_(0.01)`` (a write through ``.data``
  in the scope); and WGAN's weight clipping, ``p.data.clamp_`` between steps, on the same net.
  The example's ResNet-18 is a small CNN without BatchNorm here, so one device is a
  reference too.

This module imports only torch: the DDP runner must not import multidev.
"""

from __future__ import annotations

from collections import namedtuple

import torch
from torch import nn
from torch.nn import functional as F

try:   # the runners put this directory on sys.path; pytest imports the package
    from programs import F64, GLOBAL_BATCH, Program, _gen
except ImportError:
    from tests.programs.programs import F64, GLOBAL_BATCH, Program, _gen


# --- fast_neural_style ----------------------------------------------------------------------------------
class ConvLayer(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        return self.conv2d(self.reflection_pad(x))


class TransformerNet(nn.Module):
    """transformer_net.py's shape, 2 levels instead of 3 and no residual blocks."""

    def __init__(self):
        super().__init__()
        self.conv1, self.in1 = ConvLayer(3, 4, 3, 1), nn.InstanceNorm2d(4, affine=True)
        self.conv2, self.in2 = ConvLayer(4, 8, 3, 2), nn.InstanceNorm2d(8, affine=True)
        self.deconv = ConvLayer(8, 4, 3, 1)   # UpsampleConvLayer: upsample, then conv
        self.in3 = nn.InstanceNorm2d(4, affine=True)
        self.out = ConvLayer(4, 3, 3, 1)

    def forward(self, x):
        y = F.relu(self.in1(self.conv1(x)))
        y = F.relu(self.in2(self.conv2(y)))
        y = F.relu(self.in3(self.deconv(F.interpolate(y, mode="nearest", scale_factor=2))))
        return self.out(y)


class Vgg16(nn.Module):
    """vgg.py's Vgg16: slices of a feature stack, their outputs as a namedtuple, frozen."""

    def __init__(self, requires_grad=False):
        super().__init__()
        self.slice1 = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
        self.slice2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, padding=1), nn.ReLU())
        if not requires_grad:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, X):
        h_relu1_2 = self.slice1(X)
        h_relu2_2 = self.slice2(h_relu1_2)
        return namedtuple("VggOutputs", ["relu1_2", "relu2_2"])(h_relu1_2, h_relu2_2)


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    return features.bmm(features.transpose(1, 2)) / (ch * h * w)


def normalize_batch(batch):
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    return (batch.div_(255.0) - mean) / std


def _style_build():
    torch.manual_seed(100)
    transformer = TransformerNet().double()
    vgg = Vgg16(requires_grad=False).double()
    style = torch.rand(1, 3, 8, 8, generator=_gen(101), dtype=F64) * 255
    style = style.repeat(GLOBAL_BATCH, 1, 1, 1)
    features_style = vgg(normalize_batch(style))
    return {"model": transformer, "vgg": vgg, "opt": torch.optim.Adam(transformer.parameters(), 1e-2),
            "gram_style": [gram_matrix(y) for y in features_style], "content_weight": 1e2, "style_weight": 1e5}


def _style_batches():
    g = _gen(102)
    return [(torch.rand(GLOBAL_BATCH, 3, 8, 8, generator=g, dtype=F64) * 255,) for _ in range(3)]


def _style_step(state, batch, carry):
    (x,) = batch
    transformer, vgg, optimizer, mse_loss = state["model"], state["vgg"], state["opt"], torch.nn.MSELoss()
    n_batch = len(x)
    optimizer.zero_grad()
    y = transformer(x)
    y = normalize_batch(y)
    x = normalize_batch(x.clone())   # the example's x is a fresh loader batch: div_ must not touch ours
    features_y = vgg(y)
    features_x = vgg(x)
    content_loss = state["content_weight"] * mse_loss(features_y.relu2_2, features_x.relu2_2)
    style_loss = 0.
    for ft_y, gm_s in zip(features_y, state["gram_style"]):
        gm_y = gram_matrix(ft_y)
        style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
    style_loss *= state["style_weight"]
    total_loss = content_loss + style_loss
    total_loss.backward()
    optimizer.step()
    return total_loss.detach(), carry


# --- siamese_network ------------------------------------------------------------------------------------
class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        # float64 layers from the start: a later .double() would rewrite every copy and hide the .data write
        self.resnet = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, dtype=F64), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1))
        self.fc_in_features = 4
        self.fc = nn.Sequential(nn.Linear(self.fc_in_features * 2, 8, dtype=F64), nn.ReLU(inplace=True),
                                nn.Linear(8, 1, dtype=F64))
        self.sigmoid = nn.Sigmoid()
        self.resnet.apply(self.init_weights)
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        output = self.resnet(x)
        return output.view(output.size()[0], -1)

    def forward(self, input1, input2):
        output = torch.cat((self.forward_once(input1), self.forward_once(input2)), 1)
        return self.sigmoid(self.fc(output))


def _siamese_build():
    torch.manual_seed(103)
    model = SiameseNetwork()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    return {"model": model, "opt": optimizer, "sched": torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)}


def _siamese_batches():
    g = _gen(104)
    return [(torch.randn(GLOBAL_BATCH, 1, 6, 6, generator=g, dtype=F64), torch.randn(GLOBAL_BATCH, 1, 6, 6, generator=g, dtype=F64),
             torch.randint(0, 2, (GLOBAL_BATCH,), generator=g).to(F64)) for _ in range(4)]


def _siamese_step(state, batch, carry):
    images_1, images_2, targets = batch
    model, optimizer, criterion = state["model"], state["opt"], nn.BCELoss()
    optimizer.zero_grad()
    outputs = model(images_1, images_2).squeeze()
    loss = criterion(outputs, targets)
    loss.backward()
    optimizer.step()
    return loss.detach(), carry


# --- WGAN's weight clipping through .data, between steps (cross-replica in a port) ---------------------------
def _clip_weights(state, i):
    """wgan's ``for p in netD.parameters(): p.data.clamp_(-c, c)``, after each step."""
    for p in getattr(state["model"], "module", state["model"]).parameters():
        p.data.clamp_(-0.05, 0.05)


def _epoch_of_two(state, i):
    if i % 2 == 1:
        state["sched"].step()


VISION_EXAMPLES = [
    # Adam over a loss of ~270 (style weight 1e5): the batch split's rounding grows to 2e-10 of the
    # weights (DDP's distance from one device too; multidev equals DDP bit for bit)
    Program("fast_neural_style", _style_build, _style_batches, _style_step, tolerance=1e-9),
    Program("siamese_network", _siamese_build, _siamese_batches, _siamese_step, after_step=_epoch_of_two,
            observe=lambda state: [state["opt"].param_groups[0]["lr"]]),
    Program("wgan_clip_through_data", _siamese_build, _siamese_batches, _siamese_step, after_step=_clip_weights),
]
