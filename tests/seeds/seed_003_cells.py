"""Seed 003, the Q&A "Does tf.device('/gpu:0') utilize all available GPUs in TensorFlow?": its three code
examples, ported mechanically (``tf.`` -> ``md.``, TensorFlow ops -> torch: ``tf.random.normal`` ->
``torch.randn``, ``tf.matmul`` -> ``torch.matmul``, ``tf.add`` -> ``torch.add``), nothing else changed.
"""

DATA = ("data_not_in_the_seed", r'''import torch
# Example 3 trains on x_train, y_train, which the answer leaves to the reader: a small regression.
g = torch.Generator().manual_seed(0)
x_train = torch.randn(64, 16, generator=g)
y_train = x_train[:, :10] * 2.0
''')

CELLS = [
    ("example_1_single_gpu", r'''import multidev as md
import torch  # the port's ops

with md.device('/gpu:0'):
  # Create a large tensor
  a = torch.randn((10000, 10000), dtype=md.float32)
  # Perform a matrix multiplication
  b = torch.matmul(a, a)

  # ... further operations on b ...
'''),
    ("example_2_inefficient_multi_gpu", r'''import multidev as md
import torch  # the port's ops

with md.device('/gpu:0'):
  a = torch.randn((5000, 5000), dtype=md.float32)
  b = torch.matmul(a, a)

with md.device('/gpu:1'):
  c = torch.randn((5000, 5000), dtype=md.float32)
  d = torch.matmul(c, c)

# This operation will likely run on CPU or GPU 0 due to data transfer overhead.
e = torch.add(b, d)
'''),
    ("example_3_strategy", r'''import multidev as md

strategy = md.distribute.MirroredStrategy()

with strategy.scope():
  # Model definition
  model = md.keras.Sequential([
      md.keras.layers.Dense(1024, activation='relu'),
      md.keras.layers.Dense(10)
  ])

  # Compile the model
  model.compile(optimizer='adam',
                loss='mse',
                metrics=['mae'])

  # Train the model
  model.fit(x_train, y_train, epochs=10)
'''),
]
