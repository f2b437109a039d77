"""TensorFlow's dtype names (``md.float32``, ``md.int64``, ...) as the torch dtypes they mean."""

import torch

bfloat16, float16, float32, float64 = torch.bfloat16, torch.float16, torch.float32, torch.float64
int8, int16, int32, int64, uint8 = torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8
complex64, complex128 = torch.complex64, torch.complex128
bool = torch.bool  # noqa: A001 (TensorFlow's name)
