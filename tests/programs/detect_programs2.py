"""Segmentation programs (``detect_programs.py`` holds detection): a U-Net with ``F.interpolate`` trained with
torchvision's segmentation ``criterion`` (``cross_entropy(..., ignore_index=255)`` over ``out`` and ``aux``) on
batches of torchvision's ``cat_list`` collate (images padded with 0, masks with 255), and a Mask-style
per-instance loss over a tuple of images and target dicts. Imports only torch."""
from __future__ import annotations

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader

from detect_programs import CLASSES, F64, GLOBAL_BATCH, STEPS, Backbone, _detection_data, _train, batch_images


def cat_list(images, fill_value=0):
    max_size = tuple(max(s) for s in zip(*[img.shape for img in images]))
    batch_shape = (len(images),) + max_size
    batched_imgs = images[0].new(*batch_shape).fill_(fill_value)
    for img, pad_img in zip(images, batched_imgs):
        pad_img[..., : img.shape[-2], : img.shape[-1]].copy_(img)
    return batched_imgs


def collate_fn(batch):
    images, targets = list(zip(*batch))
    batched_imgs = cat_list(images, fill_value=0)
    batched_targets = cat_list(targets, fill_value=255)
    return batched_imgs, batched_targets


def criterion(inputs, target):
    losses = {}
    for name, x in inputs.items():
        losses[name] = nn.functional.cross_entropy(x, target, ignore_index=255)
    if len(losses) == 1:
        return losses["out"]
    return losses["out"] + 0.5 * losses["aux"]


class UNet(nn.Module):
    """Two levels, skip connection, bilinear ``F.interpolate`` up; ``aux`` from the bottleneck, as
    torchvision's FCN/DeepLab heads return ``{"out", "aux"}`` at the input's size."""

    def __init__(self, classes=CLASSES):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
        self.mid = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.ReLU())
        self.dec = nn.Sequential(nn.Conv2d(10, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, classes, 1))
        self.aux = nn.Conv2d(6, classes, 1)

    def forward(self, x):
        input_shape = x.shape[-2:]
        e = self.enc(x)
        m = self.mid(F.max_pool2d(e, 2))
        up = F.interpolate(m, size=e.shape[-2:], mode="bilinear", align_corners=False)
        out = self.dec(torch.cat([e, up], 1))
        aux = F.interpolate(self.aux(m), size=input_shape, mode="bilinear", align_corners=False)
        return {"out": F.interpolate(out, size=input_shape, mode="bilinear", align_corners=False), "aux": aux}


def _segmentation_data(seed: int, sizes) -> list:
    g = torch.Generator().manual_seed(seed)
    data = []
    for i in range(STEPS * GLOBAL_BATCH):
        h = w = sizes[i % len(sizes)]
        image = torch.rand(3, h, w, generator=g, dtype=F64)
        mask = torch.randint(0, CLASSES, (h, w), generator=g)
        mask[0, :] = 255   # a void border, as VOC's
        data.append((image, mask))
    return data


def _segmentation(port, sizes, collate_in_step=False) -> dict:
    """torchvision's segmentation ``train_one_epoch``: ``output = model(image)``, ``criterion(output, target)``."""
    torch.manual_seed(61)
    with port.scope():
        model = UNet().double()
        optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    model = port.wrap(model)
    loader = DataLoader(_segmentation_data(62, sizes), batch_size=GLOBAL_BATCH,
                        collate_fn=(lambda b: tuple(zip(*b))) if collate_in_step else collate_fn)

    def step(image, target):
        if collate_in_step:   # the port: each replica pads its own examples, as each DDP rank's collate_fn
            image, target = cat_list(image, fill_value=0), cat_list(target, fill_value=255)
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(loader)]
    return {**port.weights(model), "log": log}


def unet_segmentation(port) -> dict:
    """Images of one size per global batch's halves (8x8): ``cat_list`` pads nothing; DDP's numbers."""
    return _segmentation(port, sizes=(8,))


def unet_segmentation_mixed_sizes_padded_in_step(port) -> dict:
    """The port of the one above: ``tuple(zip(*b))`` in the loader, ``cat_list`` in the step: DDP's numbers."""
    return _segmentation(port, sizes=(12, 12, 8, 8), collate_in_step=True)


def unet_segmentation_mixed_sizes(port) -> dict:
    """12x12 then 8x8 halves: ``cat_list`` pads the global batch to 12x12 before the split, DDP's second rank
    pads its own half to 8x8 only; the padding is ignored (255) in the loss but reaches the pixels next to it
    through the convolutions and the bilinear ``F.interpolate``: not DDP's numbers (docs/ddp_port.md)."""
    return _segmentation(port, sizes=(12, 12, 8, 8))


class ToyMask(nn.Module):
    """A mask logit map per class over the padded batch; each instance's loss at its class, over its image."""

    def __init__(self):
        super().__init__()
        self.backbone = Backbone()
        self.mask_logits = nn.Conv2d(8, CLASSES, 1)

    def forward(self, images, targets=None):
        x = batch_images(images, 4)
        logits = F.interpolate(self.mask_logits(self.backbone(x)), size=x.shape[-2:], mode="bilinear",
                               align_corners=False)
        mask_logits, mask_targets = [], []
        for logit, image, target in zip(logits, images, targets):
            h, w = image.shape[-2:]
            mask_logits.append(logit[target["labels"], :h, :w].flatten(1))
            mask_targets.append(target["masks"].to(F64).flatten(1))
        # maskrcnn_loss: one mean over every instance's pixels in the (rank's) batch
        loss_mask = F.binary_cross_entropy_with_logits(torch.cat([m.reshape(-1) for m in mask_logits]),
                                                       torch.cat([t.reshape(-1) for t in mask_targets]))
        return {"loss_mask": loss_mask}


def mask_instances(port) -> dict:
    torch.manual_seed(63)
    return _train(port, ToyMask, _detection_data(64, sizes=(8, 12), boxes=(1, 3), masks=True), lr=0.1)
