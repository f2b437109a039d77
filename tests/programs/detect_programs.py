"""Detection and segmentation programs as their public sources batch and train them, ported with two lines:

* torchvision's detection reference loop (``collate_fn=lambda b: tuple(zip(*b))``: a tuple of images of different
  sizes and a tuple of target dicts; ``loss_dict = model(images, targets)``;
  ``losses = sum(loss for loss in loss_dict.values())``; ``utils.reduce_dict(loss_dict)`` for logging), around
  a toy YOLO-style head (per-image target assignment, a loss summed over each image's boxes, images padded in
  the model) and a toy FCOS head (per-location assignment, normalised by ``reduce_sum(num_pos) / num_gpus``);
* a U-Net semantic segmentation (``F.interpolate``, ``cross_entropy(..., ignore_index=255)``, torchvision's
  segmentation ``criterion`` over ``out`` and ``aux``), batched by torchvision's ``cat_list`` collate;
* a Mask-style per-instance loss (``binary_cross_entropy_with_logits`` over every instance of the batch).

Each is ``case(port) -> dict`` over ``detect_run``'s ports. Float64, synthetic seeded data, global batch 4.
Imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader

F64 = torch.float64
GLOBAL_BATCH, STEPS, CLASSES = 4, 3, 3


# --- the references' utils (torchvision's detection utils.py, FCOS's comm.py), as they read --------------------
def is_dist_avail_and_initialized():
    if not dist.is_available():
        return False
    if not dist.is_initialized():
        return False
    return True


def get_world_size():
    if not is_dist_avail_and_initialized():
        return 1
    return dist.get_world_size()


def reduce_dict(input_dict, average=True):
    world_size = get_world_size()
    if world_size < 2:
        return input_dict
    with torch.inference_mode():
        names = sorted(input_dict.keys())
        values = torch.stack([input_dict[k] for k in names], dim=0)
        dist.all_reduce(values)
        if average:
            values /= world_size
        return {k: v for k, v in zip(names, values)}


def reduce_sum(tensor):
    if get_world_size() < 2:
        return tensor
    tensor = tensor.clone()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


# --- data --------------------------------------------------------------------------------------------------------
def _detection_data(seed: int, sizes=(8, 12), boxes=(1, 3), steps=STEPS, batch=GLOBAL_BATCH, masks=False) -> list:
    g = torch.Generator().manual_seed(seed)
    data = []
    for i in range(steps * batch):
        h = w = sizes[i % len(sizes)]
        n = int(torch.randint(boxes[0], boxes[1] + 1, (), generator=g))
        xy = torch.rand(n, 2, generator=g, dtype=F64) * (w / 2)
        wh = 2 + torch.rand(n, 2, generator=g, dtype=F64) * (w / 2 - 2)
        target = {"boxes": torch.cat([xy, xy + wh], 1), "labels": torch.randint(0, CLASSES, (n,), generator=g)}
        if masks:
            yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
            b = target["boxes"]
            target["masks"] = ((xx >= b[:, 0, None, None]) & (xx < b[:, 2, None, None])
                               & (yy >= b[:, 1, None, None]) & (yy < b[:, 3, None, None])).to(torch.uint8)
        data.append((torch.rand(3, h, w, generator=g, dtype=F64), target))
    return data


def _loader(data: list, batch=GLOBAL_BATCH) -> DataLoader:
    return DataLoader(data, batch_size=batch, shuffle=False, collate_fn=lambda b: tuple(zip(*b)))


def batch_images(images, stride=4):
    """GeneralizedRCNNTransform's ``batch_images``: zeros to the batch's largest size, a multiple of ``stride``."""
    h = -(-max(im.shape[1] for im in images) // stride) * stride
    w = -(-max(im.shape[2] for im in images) // stride) * stride
    batched = images[0].new_zeros(len(images), 3, h, w)
    for img, pad_img in zip(images, batched):
        pad_img[:, :img.shape[1], :img.shape[2]].copy_(img)
    return batched


class Backbone(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.Conv2d(6, 6, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(6, 8, 3, stride=2, padding=1), nn.ReLU())


# --- a YOLO-style head: the grid cell holding a box's centre predicts it ---------------------------------------
class ToyYOLO(nn.Module):
    stride = 4

    def __init__(self):
        super().__init__()
        self.backbone = Backbone()
        self.head = nn.Conv2d(8, 1 + 4 + CLASSES, 1)

    def forward(self, images, targets=None):
        out = self.head(self.backbone(batch_images(images, self.stride)))
        losses = {"loss_obj": 0, "loss_box": 0, "loss_cls": 0}
        for pred, target in zip(out, targets):   # per-image assignment, a loss summed over its boxes
            centre = (target["boxes"][:, :2] + target["boxes"][:, 2:]) / 2
            cell = (centre / self.stride).floor().long()
            obj = torch.zeros_like(pred[0])
            obj[cell[:, 1], cell[:, 0]] = 1
            losses["loss_obj"] = losses["loss_obj"] + F.binary_cross_entropy_with_logits(pred[0], obj, reduction="sum")
            at = pred[:, cell[:, 1], cell[:, 0]].t()   # (boxes, 1 + 4 + classes)
            box = target["boxes"] / self.stride - cell.repeat(1, 2)
            losses["loss_box"] = losses["loss_box"] + F.mse_loss(at[:, 1:5], box, reduction="sum")
            losses["loss_cls"] = losses["loss_cls"] + F.cross_entropy(at[:, 5:], target["labels"], reduction="sum")
        return {k: v / len(images) for k, v in losses.items()}


def _train(port, build, data, lr=0.05, reduce_logged=False, global_batch=GLOBAL_BATCH) -> dict:
    """torchvision's ``train_one_epoch``, one epoch: the losses summed, the logged value ``reduce_dict``'s."""
    with port.scope():
        model = build().double()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4)
    model = port.wrap(model)

    def step(images, targets):
        images = list(image for image in images)
        targets = [{k: v for k, v in t.items()} for t in targets]
        loss_dict = model(images, targets)
        losses = sum(loss for loss in loss_dict.values())
        loss_dict_reduced = reduce_dict(loss_dict) if reduce_logged else loss_dict
        losses_reduced = sum(loss for loss in loss_dict_reduced.values())
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        return losses_reduced.detach()

    log = [port.mean(port.run(step, args=batch)) for batch in port.distribute(_loader(data, global_batch))]
    return {**port.weights(model), "log": log}


def yolo_detection(port) -> dict:
    """Images of 8x8 and 12x12 in one batch, 1 to 3 boxes each; the logged loss each replica's (port.mean)."""
    torch.manual_seed(51)
    return _train(port, ToyYOLO, _detection_data(52))


def yolo_reduce_dict_as_printed(port) -> dict:
    """``utils.reduce_dict(loss_dict)`` in the step, as printed: its ``dist.is_initialized()`` is refused."""
    torch.manual_seed(51)
    return _train(port, ToyYOLO, _detection_data(52), reduce_logged=True)


def yolo_three_images_three_boxes(port) -> dict:
    """A global batch of 3 images of 3 channels with 3 boxes each: every dimension 0 is 3 (cut along the
    channels before, silently)."""
    torch.manual_seed(53)
    return _train(port, ToyYOLO, _detection_data(54, sizes=(8,), boxes=(3, 3), batch=3), global_batch=3)


# --- a toy FCOS head: per-location assignment, normalised by the positives of every rank ----------------------
class ToyFCOS(nn.Module):
    stride = 4

    def __init__(self, num_pos_avg):
        super().__init__()
        self.backbone = Backbone()
        self.cls_logits, self.bbox_pred = nn.Conv2d(8, CLASSES, 1), nn.Conv2d(8, 4, 1)
        self.centerness = nn.Conv2d(8, 1, 1)
        self.num_pos_avg = num_pos_avg

    def forward(self, images, targets=None):
        feats = self.backbone(batch_images(images, self.stride))
        h, w = feats.shape[-2:]
        ys, xs = torch.meshgrid(torch.arange(h, dtype=F64), torch.arange(w, dtype=F64), indexing="ij")
        locations = torch.stack([xs.reshape(-1), ys.reshape(-1)], 1) * self.stride + self.stride // 2
        cls, reg, ctr = (head(feats).flatten(2).transpose(1, 2) for head in (self.cls_logits, self.bbox_pred,
                                                                            self.centerness))
        cls_t, reg_t, pos = [], [], []
        for target in targets:   # each location: the smallest box holding it
            b = target["boxes"]
            ltrb = torch.cat([locations[:, None] - b[None, :, :2], b[None, :, 2:] - locations[:, None]], 2)
            inside = ltrb.min(2).values > 0
            area = ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))[None].expand(len(locations), -1)
            area = torch.where(inside, area, torch.full_like(area, float("inf")))
            best, idx = area.min(1)
            positive = best < float("inf")
            labels = torch.where(positive, target["labels"][idx], torch.full_like(idx, -1))
            cls_t.append(F.one_hot(labels.clamp(min=0), CLASSES).to(F64) * positive[:, None])
            reg_t.append(ltrb[torch.arange(len(locations)), idx])
            pos.append(positive)
        cls_t, reg_t, pos = torch.stack(cls_t), torch.stack(reg_t), torch.stack(pos)
        num_pos_avg_per_gpu = self.num_pos_avg(torch.tensor(float(pos.sum()), dtype=F64))
        t = reg_t[pos]
        centerness_t = torch.sqrt((t[:, [0, 2]].min(1).values / t[:, [0, 2]].max(1).values)
                                  * (t[:, [1, 3]].min(1).values / t[:, [1, 3]].max(1).values))
        return {"loss_cls": F.binary_cross_entropy_with_logits(cls, cls_t, reduction="sum") / num_pos_avg_per_gpu,
                "loss_reg": F.smooth_l1_loss(reg[pos], t / self.stride, reduction="sum") / num_pos_avg_per_gpu,
                "loss_centerness": F.binary_cross_entropy_with_logits(ctr[pos][:, 0], centerness_t, reduction="sum")
                / num_pos_avg_per_gpu}


def _fcos_as_printed(num_pos):
    num_gpus = get_world_size()
    return max(reduce_sum(num_pos).item() / float(num_gpus), 1.0)


def fcos_num_pos_as_printed(port) -> dict:
    """``max(reduce_sum(num_pos).item() / float(num_gpus), 1.0)``: refused (its ``dist.is_initialized()``)."""
    torch.manual_seed(55)
    return _train(port, lambda: ToyFCOS(_fcos_as_printed), _detection_data(56, boxes=(1, 4)), lr=0.01)


def fcos_num_pos_ported(port) -> dict:
    """The port: the replica context's all-reduce (DDP's ``dist.all_reduce``) over ``num_replicas_in_sync``."""
    torch.manual_seed(55)
    ported = lambda num_pos: max(port.reduce_sum(num_pos).item() / float(port.world_size()), 1.0)  # noqa: E731
    return _train(port, lambda: ToyFCOS(ported), _detection_data(56, boxes=(1, 4)), lr=0.01)
