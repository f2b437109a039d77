"""Seed 002, "6-4 Model Training Using Multiple GPUs" (a Colab notebook): its code cells, ported
mechanically (``tf.`` -> ``md.``, ``tensorflow.keras`` -> ``multidev.keras``), nothing else changed.

The seed's text lost parts of its code when it was crawled (``ds_train =,y_train)) \\``): the lost
parts are restored from the notebook it was taken from (eat_tensorflow2_in_30_days, 6-4), each line
marked ``# (restored)``; its printed output (two logical GPUs, 281 steps of 32) shows they ran. The
Colab magics ``%tensorflow_version 2.x`` and ``%%time`` are IPython syntax, not Python: left out.
"""

CELLS = [
    ("setup", r'''import multidev as md
from multidev.keras import *
# Simulate two logical GPUs with one physical GPU
gpus = md.config.experimental.list_physical_devices('GPU')
if gpus:
    # Set two logical GPUs for simulation
        md.config.experimental.set_virtual_device_configuration(gpus[0],  # (restored)
            [md.config.experimental.VirtualDeviceConfiguration(memory_limit=1024),  # (restored)
             md.config.experimental.VirtualDeviceConfiguration(memory_limit=1024)])  # (restored)
        logical_gpus = md.config.experimental.list_logical_devices('GPU')
        print(len(gpus), "Physical GPU,", len(logical_gpus), "Logical GPUs")
'''),
    ("data_preparation", r'''MAX_LEN = 300
BATCH_SIZE = 32  # (restored)
(x_train,y_train),(x_test,y_test) = datasets.reuters.load_data()
x_train = preprocessing.sequence.pad_sequences(x_train,maxlen=MAX_LEN)
x_test = preprocessing.sequence.pad_sequences(x_test,maxlen=MAX_LEN)

MAX_WORDS = x_train.max()+1
CAT_NUM = y_train.max()+1

ds_train = md.data.Dataset.from_tensor_slices((x_train,y_train)) \
          .shuffle(buffer_size = 1000).batch(BATCH_SIZE) \
          .prefetch(md.data.experimental.AUTOTUNE).cache()  # (restored)

ds_test = md.data.Dataset.from_tensor_slices((x_test,y_test)) \
          .shuffle(buffer_size = 1000).batch(BATCH_SIZE) \
          .prefetch(md.data.experimental.AUTOTUNE).cache()  # (restored)
'''),
    ("model_defining", r'''md.keras.backend.clear_session()  # (restored)
def create_model():
    model = models.Sequential()

    model.add(layers.Embedding(MAX_WORDS,7,input_length=MAX_LEN))  # (restored)
    model.add(layers.Conv1D(filters = 64,kernel_size = 5,activation = "relu"))
    model.add(layers.MaxPool1D(2))  # (restored)
    model.add(layers.Conv1D(filters = 32,kernel_size = 3,activation = "relu"))
    model.add(layers.MaxPool1D(2))  # (restored)
    model.add(layers.Flatten())  # (restored)
    model.add(layers.Dense(CAT_NUM,activation = "softmax"))
    return(model)  # (restored)

def compile_model(model):
    model.compile(optimizer=optimizers.Nadam(),  # (restored)
                loss=losses.SparseCategoricalCrossentropy(from_logits=False),  # (restored)
                metrics=[metrics.SparseCategoricalAccuracy(),metrics.SparseTopKCategoricalAccuracy(5)])  # (restored)
    return(model)  # (restored)
'''),
    ("model_training", r'''# Add the following two lines of code
strategy = md.distribute.MirroredStrategy()  
with strategy.scope(): 
    model = create_model()
    model.summary()  # (restored)
    model = compile_model(model)
history = model.fit(ds_train,validation_data = ds_test,epochs = 10)  
'''),
]
