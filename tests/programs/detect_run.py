"""Run the programs of ``detect_programs.py`` / ``detect_programs2.py`` and write their results as JSON into the
directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/detect_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/detect_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/detect_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``DETECT_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_ways_main import only, run_main  # noqa: E402
import detect_programs as programs  # noqa: E402
import detect_programs2 as programs2  # noqa: E402
from pytutorials_run import DdpPort, MirroredPort  # noqa: E402

ALL = {f.__name__: f for f in (
    programs.yolo_detection, programs.yolo_reduce_dict_as_printed, programs.yolo_three_images_three_boxes,
    programs.fcos_num_pos_as_printed, programs.fcos_num_pos_ported, programs2.unet_segmentation,
    programs2.unet_segmentation_mixed_sizes, programs2.unet_segmentation_mixed_sizes_padded_in_step,
    programs2.mask_instances)}
ALL = only(ALL, "DETECT_ONLY")


class DetDdpPort(DdpPort):
    """A DDP rank: its own loader's batches, the consecutive half of each global batch's examples collated by
    the program's ``collate_fn`` (a tuple of images and of targets; ``cat_list``'s padding to the rank's own
    largest image)."""

    def distribute(self, loader):
        for indices in loader.batch_sampler:
            mine = torch.tensor_split(torch.tensor(indices), self.world)[self.rank].tolist()
            yield loader.collate_fn([loader.dataset[i] for i in mine])

    def reduce_sum(self, tensor):
        return programs.reduce_sum(tensor)   # FCOS's, with its process group

    def world_size(self):
        return torch.distributed.get_world_size()


class DetMirroredPort(MirroredPort):
    """The multidev port; ``reduce_sum`` is the line a port writes for FCOS's ``reduce_sum`` in the step."""

    def reduce_sum(self, tensor):
        import multidev as md
        return md.distribute.get_replica_context().all_reduce("sum", tensor)

    def world_size(self):
        import multidev as md
        return md.distribute.get_replica_context().num_replicas_in_sync


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    run_main("detect", ALL, DetMirroredPort, DetDdpPort)
