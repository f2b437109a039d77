"""Batches that are lists of examples (torchvision's detection reference: ``collate_fn=lambda b: tuple(zip(*b))``,
a tuple of images and a tuple of target dicts) are cut by example, each replica its consecutive examples, as a
DDP rank's half of the global batch; before, each image was cut along its channels and each target along its
boxes, silently where the sizes agreed (3 images of 3 channels with 3 boxes each)."""
from __future__ import annotations

import json

import torch

from multidev.distribute.batch_split import leading_size, split_element


def _detection_batch(n: int, boxes: int = 3, sizes=(8,)) -> tuple:
    images = tuple(torch.full((3, sizes[i % len(sizes)], 8), float(i)) for i in range(n))
    targets = tuple({"boxes": torch.full((boxes, 4), float(i)), "labels": torch.arange(boxes)} for i in range(n))
    return images, targets


def test_images_and_target_dicts_are_cut_by_example():
    images, targets = _detection_batch(3)   # 3 images, 3 channels, 3 boxes: every dimension 0 is 3
    assert leading_size((images, targets)) == 3
    first, second = split_element((images, targets), 2, 3, 1)
    assert isinstance(first, tuple) and isinstance(first[0], tuple) and isinstance(first[1], tuple)
    assert [float(im[0, 0, 0]) for im in first[0]] == [0.0, 1.0] and float(second[0][0][0, 0, 0]) == 2.0
    assert all(im.shape == (3, 8, 8) for part in (first, second) for im in part[0]), "whole images"
    assert [float(t["boxes"][0, 0]) for t in second[1]] == [2.0] and second[1][0]["boxes"].shape == (3, 4)


def test_images_of_different_sizes_and_box_counts():
    images = tuple(torch.zeros(3, 4 + i, 5) for i in range(4))
    targets = [{"boxes": torch.zeros(i + 1, 4), "labels": torch.zeros(i + 1, dtype=torch.long)} for i in range(4)]
    parts = split_element((images, targets), 2, 4, 1)
    assert [len(p[0]) for p in parts] == [2, 2] and isinstance(parts[0][1], list)
    assert [im.shape[1] for im in parts[1][0]] == [6, 7] and [t["boxes"].shape[0] for t in parts[1][1]] == [3, 4]
    # a partial last batch of 3 in batches of 4 is spread as TensorFlow spreads rows: [2, 1]
    assert [len(p[0]) for p in split_element((images[:3], targets[:3]), 2, 4, 1)] == [2, 1]


def test_batched_tensors_in_nested_tuples_keep_tensorflow_s_cut():
    x1, x2, y1, y2 = torch.zeros(4, 5), torch.ones(4, 5), torch.zeros(4), torch.ones(4)
    parts = split_element(((x1, x2), (y1, y2)), 2, 4, 1)
    assert parts[0][0][0].shape == (2, 5) and parts[1][1][1].shape == (2,)


PROGRAM = r"""
import json, torch, multidev as md
from torch.utils.data import DataLoader
strategy = md.distribute.MirroredStrategy()
data = [(torch.full((3, 6 + i % 2, 6), float(i), dtype=torch.float64),
         {"boxes": torch.full((3, 4), float(i)), "labels": torch.arange(3)}) for i in range(9)]
loader = DataLoader(data, batch_size=3, collate_fn=lambda b: tuple(zip(*b)))

def step(images, targets):   # the detection reference's loop body, as printed
    images = list(image for image in images)
    targets = [{k: v for k, v in t.items()} for t in targets]
    return torch.tensor([[float(im[0, 0, 0]), im.shape[0], t["boxes"].shape[0]] for im, t in zip(images, targets)])

seen = []
for images, targets in strategy.experimental_distribute_dataset(loader):
    seen.append([r.tolist() for r in strategy.experimental_local_results(strategy.run(step, args=(images, targets)))])
print("SEEN" + json.dumps(seen))
"""


def test_a_detection_loader_feeds_each_replica_whole_examples(fresh):
    out = fresh(PROGRAM, env={"MULTIDEV_LOGICAL_CPUS": "2"}).stdout
    seen = json.loads(out.split("SEEN", 1)[1])
    firsts = [[row[0] for row in replica] for step in seen for replica in step]
    assert firsts == [[0.0, 1.0], [2.0], [3.0, 4.0], [5.0], [6.0, 7.0], [8.0]], "every example once, in order"
    assert all(row[1:] == [3.0, 3.0] for step in seen for replica in step for row in replica), "whole images, boxes"
