"""Seeds 000 and 001, TensorFlow's "Use a GPU" guide (two crawls of the same page; the same code cells):
every code cell, ported mechanically (``tf.`` -> ``md.``, TensorFlow ops on tensors -> torch:
``tf.matmul`` -> ``torch.matmul``), nothing else changed. Named after the guide's sections.
"""

CELLS = [
    ("setup", r'''import multidev as md
import torch  # the port's ops (tf.matmul -> torch.matmul)
print("Num GPUs Available: ", len(md.config.list_physical_devices('GPU')))
'''),
    ("logging_device_placement", r'''md.debugging.set_log_device_placement(True)

# Create some tensors
a = md.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
b = md.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
c = torch.matmul(a, b)

print(c)
'''),
    ("manual_device_placement", r'''md.debugging.set_log_device_placement(True)

# Place tensors on the CPU
with md.device('/CPU:0'):
  a = md.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
  b = md.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])

# Run on the GPU
c = torch.matmul(a, b)
print(c)
'''),
    ("visible_devices", r'''gpus = md.config.list_physical_devices('GPU')
if gpus:
  # Restrict TensorFlow to only use the first GPU
  try:
    md.config.set_visible_devices(gpus[0], 'GPU')
    logical_gpus = md.config.list_logical_devices('GPU')
    print(len(gpus), "Physical GPUs,", len(logical_gpus), "Logical GPU")
  except RuntimeError as e:
    # Visible devices must be set before GPUs have been initialized
    print(e)
'''),
    ("memory_growth", r'''gpus = md.config.list_physical_devices('GPU')
if gpus:
  try:
    # Currently, memory growth needs to be the same across GPUs
    for gpu in gpus:
      md.config.experimental.set_memory_growth(gpu, True)
    logical_gpus = md.config.list_logical_devices('GPU')
    print(len(gpus), "Physical GPUs,", len(logical_gpus), "Logical GPUs")
  except RuntimeError as e:
    # Memory growth must be set before GPUs have been initialized
    print(e)
'''),
    ("memory_limit", r'''gpus = md.config.list_physical_devices('GPU')
if gpus:
  # Restrict TensorFlow to only allocate 1GB of memory on the first GPU
  try:
    md.config.set_logical_device_configuration(
        gpus[0],
        [md.config.LogicalDeviceConfiguration(memory_limit=1024)])
    logical_gpus = md.config.list_logical_devices('GPU')
    print(len(gpus), "Physical GPUs,", len(logical_gpus), "Logical GPUs")
  except RuntimeError as e:
    # Virtual devices must be set before GPUs have been initialized
    print(e)
'''),
    ("single_gpu_on_multi_gpu_system", r'''md.debugging.set_log_device_placement(True)

try:
  # Specify an invalid GPU device
  with md.device('/device:GPU:2'):
    a = md.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = md.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    c = torch.matmul(a, b)
except RuntimeError as e:
  print(e)
'''),
    ("soft_device_placement", r'''md.config.set_soft_device_placement(True)
md.debugging.set_log_device_placement(True)

# Creates some tensors
a = md.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
b = md.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
c = torch.matmul(a, b)

print(c)
'''),
    ("virtual_gpus", r'''gpus = md.config.list_physical_devices('GPU')
if gpus:
  # Create 2 virtual GPUs with 1GB memory each
  try:
    md.config.set_logical_device_configuration(
        gpus[0],
        [md.config.LogicalDeviceConfiguration(memory_limit=1024),
         md.config.LogicalDeviceConfiguration(memory_limit=1024)])
    logical_gpus = md.config.list_logical_devices('GPU')
    print(len(gpus), "Physical GPU,", len(logical_gpus), "Logical GPUs")
  except RuntimeError as e:
    # Virtual devices must be set before GPUs have been initialized
    print(e)
'''),
    ("with_strategy", r'''md.debugging.set_log_device_placement(True)
gpus = md.config.list_logical_devices('GPU')
strategy = md.distribute.MirroredStrategy(gpus)
with strategy.scope():
  inputs = md.keras.layers.Input(shape=(1,))
  predictions = md.keras.layers.Dense(1)(inputs)
  model = md.keras.models.Model(inputs=inputs, outputs=predictions)
  model.compile(loss='mse',
                optimizer=md.keras.optimizers.SGD(learning_rate=0.2))
'''),
    ("manual_placement", r'''md.debugging.set_log_device_placement(True)

gpus = md.config.list_logical_devices('GPU')
if gpus:
  # Replicate your computation on multiple GPUs
  c = []
  for gpu in gpus:
    with md.device(gpu.name):
      a = md.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
      b = md.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
      c.append(torch.matmul(a, b))

  with md.device('/CPU:0'):
    matmul_sum = md.add_n(c)

  print(matmul_sum)
'''),
]
