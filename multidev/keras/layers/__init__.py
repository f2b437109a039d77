"""``md.keras.layers``: Keras layers as ``torch.nn.Module``s (channels-last, built on first call).

Example:
    from multidev.keras import layers
    model = md.keras.models.Sequential([layers.Dense(8, activation="relu"), layers.Dense(1)])
"""

from multidev.keras._missing import missing_names
from multidev.keras.layers import experimental
from multidev.keras.layers.activation_layers import ELU, LeakyReLU, PReLU, ReLU, Softmax
from multidev.keras.layers.attention import MultiHeadAttention
from multidev.keras.layers.dot_attention import AdditiveAttention, Attention
from multidev.keras.layers.image_layers import CenterCrop, RandomCrop, Resizing
from multidev.keras.layers.time_distributed import TimeDistributed
from multidev.keras.layers.base import Layer
from multidev.keras.layers.category_encoding import CategoryEncoding
from multidev.keras.layers.conv import Conv1D, Conv2D, Conv3D, Convolution1D, Convolution2D, Convolution3D
from multidev.keras.layers.conv_extra import (Conv1DTranspose, Conv2DTranspose, Convolution1DTranspose,
                                              Convolution2DTranspose, DepthwiseConv1D, DepthwiseConv2D,
                                              SeparableConv1D, SeparableConv2D, SeparableConvolution1D,
                                              SeparableConvolution2D)
from multidev.keras.layers.discretization import Discretization
from multidev.keras.layers.hashing import Hashing
from multidev.keras.layers.core import Activation, Dense, Dropout, Embedding, Flatten, Identity, Lambda, Reshape
from multidev.keras.layers.input_layer import Input, InputLayer
from multidev.keras.layers.input_spec import InputSpec
from multidev.keras.layers.keras_tensor import KerasTensor
from multidev.keras.layers.masking import Masking
from multidev.keras.layers.merge import (Add, Average, Concatenate, Dot, Maximum, Minimum, Multiply, Subtract, add,
                                         average, concatenate, dot, maximum, minimum, multiply, subtract)
from multidev.keras.layers.normalization import (BatchNormalization, GroupNormalization, LayerNormalization,
                                                 SyncBatchNormalization, UnitNormalization)
from multidev.keras.layers.reshaping import (Cropping1D, Cropping2D, Permute, RepeatVector, UpSampling1D,
                                             UpSampling2D, ZeroPadding1D, ZeroPadding2D)
from multidev.keras.layers.pooling import (AveragePooling1D, AveragePooling2D, AvgPool1D, AvgPool2D,
                                           GlobalAveragePooling1D, GlobalAveragePooling2D, GlobalAvgPool1D,
                                           GlobalAvgPool2D, GlobalMaxPool1D, GlobalMaxPool2D,
                                           GlobalMaxPooling1D, GlobalMaxPooling2D, MaxPool1D, MaxPool2D,
                                           MaxPooling1D, MaxPooling2D)
from multidev.keras.layers.pooling import (AveragePooling3D, AvgPool3D, GlobalAveragePooling3D, GlobalAvgPool3D,
                                           GlobalMaxPool3D, GlobalMaxPooling3D, MaxPool3D, MaxPooling3D)
from multidev.keras.layers.preprocessing import (Normalization, RandomFlip, RandomRotation, RandomTranslation, RandomZoom,
                                                 Rescaling)
from multidev.keras.layers.recurrent import GRU, LSTM, Bidirectional
from multidev.keras.layers.rnn import RNN, SimpleRNN
from multidev.keras.layers.rnn_cells import GRUCell, LSTMCell, SimpleRNNCell
from multidev.keras.layers.text_vectorization import TextVectorization
from multidev.keras.layers.lookup import IntegerLookup, StringLookup

__all__ = [
    "Layer", "Input", "InputLayer", "InputSpec", "KerasTensor", "Dense", "Activation", "Identity", "Dropout", "Flatten",
    "Reshape", "Embedding", "Lambda", "Conv1D", "Conv2D", "Convolution1D", "Convolution2D", "MaxPool1D", "MaxPool2D",
    "MaxPooling1D", "MaxPooling2D", "AveragePooling1D", "AveragePooling2D", "AvgPool1D", "AvgPool2D",
    "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAvgPool1D", "GlobalAvgPool2D",
    "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPool1D", "GlobalMaxPool2D", "BatchNormalization",
    "SyncBatchNormalization", "LayerNormalization", "LSTM", "GRU", "Bidirectional", "Add", "Subtract",
    "Multiply", "Average", "Maximum", "Concatenate", "add", "concatenate", "subtract", "multiply", "average", "maximum", "minimum", "dot", "TextVectorization", "StringLookup",
    "IntegerLookup", "experimental", "MultiHeadAttention", "Masking", "Normalization", "Rescaling", "RandomFlip", "RandomCrop",
    "RandomRotation", "RandomTranslation", "RandomZoom", "ReLU", "LeakyReLU", "Softmax", "ELU", "CategoryEncoding",
    # kerasnumerics: Keras 3 layers checked against TF 2.21's numbers (tests/keras/test_layer_numerics.py)
    "PReLU", "Dot", "Minimum", "GroupNormalization", "UnitNormalization", "Permute", "RepeatVector",
    "ZeroPadding1D", "ZeroPadding2D", "Cropping1D", "Cropping2D", "UpSampling1D", "UpSampling2D",
    "Conv3D", "Convolution3D", "Conv1DTranspose", "Conv2DTranspose", "Convolution1DTranspose",
    "Convolution2DTranspose", "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D",
    "SeparableConvolution1D", "SeparableConvolution2D", "MaxPooling3D", "MaxPool3D", "AveragePooling3D",
    "AvgPool3D", "GlobalAveragePooling3D", "GlobalAvgPool3D", "GlobalMaxPooling3D", "GlobalMaxPool3D",
    "Attention", "AdditiveAttention", "Resizing", "CenterCrop", "TimeDistributed",
    # kerasguides: preprocessing and RNN guides (tests/keras/test_tf_guides.py)
    "Discretization", "Hashing", "RNN", "SimpleRNN", "SimpleRNNCell", "LSTMCell", "GRUCell",
]

__getattr__ = missing_names(__name__, 'layers', globals())  # unknown names: does Keras 3 have them?
