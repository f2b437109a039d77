"""The table of layer cases that ``record_layer_numerics.py`` runs in TensorFlow 2.21 and
``test_layer_numerics.py`` replays on md.keras (plain data: both frameworks import it).

A case: ``(id, layer class name, constructor kwargs, input shapes, options)``. An input shape is a
tuple (float32 normal input) or ``("int", shape, high)`` (integer ids in [0, high)). Options:
``call`` (extra call kwargs), ``form`` ("single", "list" for merge layers, "args" for the attention
layers' ``layer(q, v[, k])``), ``train`` (also record ``training=True``), ``mask`` (a boolean
``attention_mask`` of shape (B, T, S) drawn from the seed).
"""

def make_layer(layers, cls, kwargs):
    """``layers.<cls>(**kwargs)``; a wrapped ``layer`` given as {"class_name", "config"} is built first."""
    inner = kwargs.get("layer")
    if isinstance(inner, dict):
        kwargs = {**kwargs, "layer": getattr(layers, inner["class_name"])(**inner["config"])}
    return getattr(layers, cls)(**kwargs)


def call_layer(layer, xs, opts, training, mask, to_tensor):
    """Call ``layer`` as the case's ``form`` says; Keras masks (nested lists) become ``to_tensor``'s tensors."""
    kw = dict(opts.get("call", {}))
    if "mask" in kw:
        kw["mask"] = [to_tensor(m) for m in kw["mask"]]
    if "one_mask" in kw:   # a single layer's mask (Softmax)
        kw["mask"] = to_tensor(kw.pop("one_mask"))
    if mask is not None:
        kw["attention_mask"] = mask
    form = opts.get("form", "single")
    if form == "list":
        return layer(list(xs), training=training, **kw)
    if form == "args":
        return layer(*xs, training=training, **kw)
    return layer(xs[0], training=training, **kw)


ACTS = ["relu", "gelu", "swish", "silu", "softplus", "selu", "elu", "hard_sigmoid", "leaky_relu", "sigmoid",
        "tanh", "softsign", "relu6", "exponential", "mish", "log_softmax", "softmax", "linear", "hard_silu"]

# activation functions called directly: (id, name, kwargs)
ACTIVATION_CALLS = [
    ("gelu_exact", "gelu", {}), ("gelu_tanh", "gelu", {"approximate": True}),
    ("leaky_default", "leaky_relu", {}), ("leaky_0.1", "leaky_relu", {"negative_slope": 0.1}),
    ("elu_alpha", "elu", {"alpha": 0.5}), ("relu_max", "relu", {"max_value": 1.0}),
    ("relu_thr", "relu", {"threshold": 0.5, "negative_slope": 0.1}), ("softmax_ax1", "softmax", {"axis": 1}),
    ("hard_sigmoid", "hard_sigmoid", {}), ("selu", "selu", {}), ("softplus", "softplus", {}),
]


def _cases():
    c = []
    for act in ACTS:
        c.append((f"dense_{act}", "Dense", {"units": 5, "activation": act}, [(3, 4)], {}))
    c.append(("dense_nobias", "Dense", {"units": 3, "use_bias": False}, [(2, 3, 4)], {}))
    conv_kws = [
        {"filters": 3, "kernel_size": 3}, {"filters": 3, "kernel_size": 2, "padding": "same"},
        {"filters": 3, "kernel_size": 4, "strides": 2, "padding": "same"},
        {"filters": 3, "kernel_size": 3, "strides": 2, "padding": "same"},
        {"filters": 2, "kernel_size": 3, "dilation_rate": 2, "padding": "same"},
        {"filters": 4, "kernel_size": 3, "groups": 2, "activation": "relu"},
        {"filters": 3, "kernel_size": 3, "strides": 2, "use_bias": False},
    ]
    for i, kw in enumerate(conv_kws):
        c.append((f"conv1d_{i}", "Conv1D", kw, [(2, 9, 4)], {}))
        c.append((f"conv2d_{i}", "Conv2D", kw, [(2, 7, 8, 4)], {}))
    c.append(("conv1d_causal", "Conv1D", {"filters": 3, "kernel_size": 3, "padding": "causal"}, [(2, 9, 4)], {}))
    c.append(("conv1d_causal_dil", "Conv1D", {"filters": 3, "kernel_size": 2, "padding": "causal",
                                              "dilation_rate": 3}, [(2, 9, 4)], {}))
    c.append(("conv2d_rect", "Conv2D", {"filters": 2, "kernel_size": (2, 3), "strides": (2, 1), "padding": "same"},
              [(2, 7, 8, 3)], {}))
    for kind in ("Max", "Average"):
        for i, kw in enumerate([{}, {"pool_size": 3, "strides": 2}, {"pool_size": 3, "strides": 2, "padding": "same"},
                                {"pool_size": 2, "padding": "same"}, {"pool_size": 4, "strides": 1, "padding": "same"}]):
            c.append((f"{kind.lower()}pool1d_{i}", f"{kind}Pooling1D", kw, [(2, 9, 3)], {}))
            c.append((f"{kind.lower()}pool2d_{i}", f"{kind}Pooling2D", kw, [(2, 7, 8, 3)], {}))
        for r, shape in ((1, (2, 5, 3)), (2, (2, 4, 5, 3))):
            for keep in (False, True):
                c.append((f"global{kind.lower()}{r}d_{keep}", f"Global{kind}Pooling{r}D", {"keepdims": keep},
                          [shape], {}))
    bn = [{}, {"center": False, "scale": False}, {"axis": 1}, {"momentum": 0.9, "epsilon": 1e-5}]
    for i, kw in enumerate(bn):
        c.append((f"batchnorm_{i}", "BatchNormalization", kw, [(6, 3, 4)], {"train": True}))
    for i, kw in enumerate([{}, {"axis": [1, 2]}, {"axis": 1}, {"center": False, "scale": False},
                            {"epsilon": 1e-5, "axis": [-2, -1]}]):
        c.append((f"layernorm_{i}", "LayerNormalization", kw, [(2, 3, 4)], {}))
    c.append(("layernorm_rms", "LayerNormalization", {"rms_scaling": True}, [(2, 3, 4)], {}))
    c.append(("batchnorm_2d", "BatchNormalization", {"momentum": 0.5}, [(5, 4)], {"train": True}))
    c.append(("batchnorm_4d_nobeta", "BatchNormalization", {"center": False}, [(3, 2, 2, 3)], {"train": True}))
    c.append(("embedding_mask_zero", "Embedding", {"input_dim": 6, "output_dim": 3, "mask_zero": True},
              [("int", (2, 5), 6)], {}))
    c.append(("activation_leaky", "Activation", {"activation": "leaky_relu"}, [(2, 7)], {}))
    c.append(("embedding", "Embedding", {"input_dim": 10, "output_dim": 4}, [("int", (2, 5), 10)], {}))
    c.append(("dropout_infer", "Dropout", {"rate": 0.5}, [(2, 5)], {}))
    c.append(("flatten", "Flatten", {}, [(2, 3, 4)], {}))
    c.append(("reshape", "Reshape", {"target_shape": (-1,)}, [(2, 3, 4)], {}))
    c.append(("reshape2", "Reshape", {"target_shape": (4, -1)}, [(2, 3, 4)], {}))
    for name in ("Concatenate", "Add", "Multiply", "Average", "Maximum", "Subtract"):
        c.append((f"merge_{name.lower()}", name, {}, [(2, 3), (2, 3)], {"form": "list"}))
    c.append(("merge_concat_ax1", "Concatenate", {"axis": 1}, [(2, 3, 2), (2, 4, 2)], {"form": "list"}))
    c.append(("merge_add3", "Add", {}, [(2, 3), (2, 3), (2, 3)], {"form": "list"}))
    for i, kw in enumerate([{}, {"axis": 1}]):
        c.append((f"softmax_{i}", "Softmax", kw, [(2, 3, 4)], {}))
    c.append(("softmax_axes", "Softmax", {"axis": [1, 2]}, [(2, 3, 4)], {}))
    rows = [[True, False, True, True], [False] * 4, [True, True, False, False]]
    c.append(("softmax_mask", "Softmax", {}, [(2, 3, 4)], {"call": {"one_mask": [rows, rows[::-1]]}}))
    c.append(("softmax_mask_float", "Softmax", {"axis": 1}, [(2, 3, 4)],
              {"call": {"one_mask": [[[1.0, 0.0, 1.0, 0.2]] * 3] * 2}}))
    for i, kw in enumerate([{}, {"max_value": 0.5}, {"negative_slope": 0.1}, {"threshold": 0.3},
                            {"max_value": 1.0, "negative_slope": 0.2, "threshold": 0.1}, {"max_value": 6.0}]):
        c.append((f"relu_{i}", "ReLU", kw, [(2, 7)], {}))
    c.append(("leakyrelu", "LeakyReLU", {}, [(2, 7)], {}))
    c.append(("leakyrelu_01", "LeakyReLU", {"negative_slope": 0.1}, [(2, 7)], {}))
    c.append(("elu_layer", "ELU", {"alpha": 0.7}, [(2, 7)], {}))
    c.append(("activation_gelu", "Activation", {"activation": "gelu"}, [(2, 7)], {}))
    mha = {"num_heads": 2, "key_dim": 3}
    c.append(("mha_self", "MultiHeadAttention", mha, [(2, 4, 5), (2, 4, 5)], {"form": "args"}))
    c.append(("mha_qvk", "MultiHeadAttention", {**mha, "value_dim": 2, "output_shape": 6},
              [(2, 4, 5), (2, 3, 6), (2, 3, 7)], {"form": "args"}))
    c.append(("mha_causal", "MultiHeadAttention", mha, [(2, 4, 5), (2, 4, 5)],
              {"form": "args", "call": {"use_causal_mask": True}}))
    c.append(("mha_mask", "MultiHeadAttention", mha, [(2, 4, 5), (2, 3, 5)], {"form": "args", "mask": True}))
    c.append(("mha_mask_empty_row", "MultiHeadAttention", mha, [(2, 4, 5), (2, 3, 5)],
              {"form": "args", "mask": "empty_row", "call": {"return_attention_scores": True}}))
    c.append(("mha_scores", "MultiHeadAttention", {**mha, "use_bias": False}, [(2, 4, 5), (2, 3, 5)],
              {"form": "args", "call": {"return_attention_scores": True}}))
    c.append(("rescaling", "Rescaling", {"scale": 0.5, "offset": -1.0}, [(2, 5)], {}))
    c.append(("normalization", "Normalization", {"mean": [0.5, -1.0, 0.0], "variance": [4.0, 0.25, 0.0]},
              [(2, 3)], {}))
    c.append(("normalization_inv", "Normalization", {"mean": [0.5, -1.0, 0.0], "variance": [4.0, 0.25, 1.0],
                                                     "invert": True}, [(2, 3)], {}))
    c.extend(_more_cases())
    c.extend(_kink_cases())
    return c


def _kink_cases():
    """Inputs on a 0.5 grid: ties in max pooling (TF's gradient goes to the first maximum, reduce_max's
    is shared) and activations at their kinks, where TF's gradient convention shows."""
    g = {"grid": True}
    c = [(f"grid_act_{a}", "Activation", {"activation": a}, [(4, 9)], g)
         for a in ("relu", "relu6", "elu", "selu", "leaky_relu", "hard_sigmoid", "hard_silu", "gelu", "softplus",
                   "swish", "mish", "softsign")]
    for i, kw in enumerate([{}, {"max_value": 0.5}, {"negative_slope": 0.1}, {"threshold": 0.5},
                            {"max_value": 1.0, "negative_slope": 0.2, "threshold": 0.5}, {"max_value": 6.0}]):
        c.append((f"grid_relu_{i}", "ReLU", kw, [(4, 9)], g))
    c += [("grid_leakyrelu", "LeakyReLU", {}, [(4, 9)], g), ("grid_elu", "ELU", {"alpha": 0.5}, [(4, 9)], g),
          ("grid_prelu", "PReLU", {"alpha_initializer": "ones"}, [(4, 9)], g),
          ("grid_maxpool1d", "MaxPooling1D", {"pool_size": 3, "strides": 2, "padding": "same"}, [(2, 9, 2)], g),
          ("grid_maxpool2d", "MaxPooling2D", {"pool_size": 3, "strides": 1}, [(2, 5, 6, 2)], g),
          ("grid_maxpool3d", "MaxPooling3D", {"pool_size": 2, "padding": "same"}, [(1, 3, 4, 5, 2)], g),
          ("grid_globalmax1d", "GlobalMaxPooling1D", {}, [(2, 9, 3)], g),
          ("grid_globalmax2d", "GlobalMaxPooling2D", {}, [(2, 4, 5, 3)], g),
          ("grid_maximum", "Maximum", {}, [(3, 6), (3, 6)], {"form": "list", **g}),
          ("grid_minimum", "Minimum", {}, [(3, 6), (3, 6)], {"form": "list", **g})]
    return c


def _more_cases():
    """Reshaping layers, Dot, PReLU, group/unit normalization."""
    c = [("permute", "Permute", {"dims": (2, 1)}, [(2, 3, 4)], {}),
         ("permute3", "Permute", {"dims": (3, 1, 2)}, [(2, 3, 4, 5)], {}),
         ("repeatvector", "RepeatVector", {"n": 3}, [(2, 4)], {}),
         ("zeropad1d", "ZeroPadding1D", {"padding": (1, 2)}, [(2, 4, 3)], {}),
         ("zeropad2d", "ZeroPadding2D", {"padding": ((1, 0), (2, 3))}, [(2, 3, 4, 2)], {}),
         ("zeropad2d_int", "ZeroPadding2D", {"padding": 1}, [(2, 3, 4, 2)], {}),
         ("crop1d", "Cropping1D", {"cropping": (1, 2)}, [(2, 6, 3)], {}),
         ("crop2d", "Cropping2D", {"cropping": ((1, 0), (2, 1))}, [(2, 5, 6, 2)], {}),
         ("upsample1d", "UpSampling1D", {"size": 3}, [(2, 4, 3)], {}),
         ("upsample2d", "UpSampling2D", {"size": (2, 3)}, [(2, 3, 4, 2)], {}),
         ("upsample2d_bilinear", "UpSampling2D", {"size": 2, "interpolation": "bilinear"}, [(2, 3, 4, 2)], {}),
         ("upsample2d_bilinear_23", "UpSampling2D", {"size": (2, 3), "interpolation": "bilinear"},
          [(1, 3, 3, 2)], {}),
         ("merge_minimum", "Minimum", {}, [(2, 3), (2, 3)], {"form": "list"}),
         ("dot_1", "Dot", {"axes": 1}, [(2, 4), (2, 4)], {"form": "list"}),
         ("dot_norm", "Dot", {"axes": 1, "normalize": True}, [(2, 4), (2, 4)], {"form": "list"}),
         ("dot_3d", "Dot", {"axes": 2}, [(2, 3, 4), (2, 5, 4)], {"form": "list"}),
         ("dot_3d_12", "Dot", {"axes": (1, 2)}, [(2, 4, 3), (2, 5, 4)], {"form": "list"}),
         ("dot_3d_norm", "Dot", {"axes": [2, 2], "normalize": True}, [(2, 3, 4), (2, 5, 4)], {"form": "list"}),
         ("prelu", "PReLU", {"alpha_initializer": {"class_name": "RandomUniform", "config": {}}}, [(2, 3, 4)], {}),
         ("prelu_shared", "PReLU", {"alpha_initializer": {"class_name": "RandomUniform", "config": {}},
                                    "shared_axes": [1]}, [(2, 3, 4)], {}),
         ("unitnorm", "UnitNormalization", {}, [(2, 3, 4)], {}),
         ("unitnorm_axes", "UnitNormalization", {"axis": [1, 2]}, [(2, 3, 4)], {})]
    for i, kw in enumerate([{"filters": 2, "kernel_size": 3}, {"filters": 2, "kernel_size": 2, "strides": 2,
                                                               "padding": "same", "dilation_rate": 1},
                            {"filters": 2, "kernel_size": 3, "strides": 2, "padding": "same"},
                            {"filters": 2, "kernel_size": 4, "strides": 2, "padding": "same"},
                            {"filters": 2, "kernel_size": 3, "strides": 2, "output_padding": 1},
                            {"filters": 2, "kernel_size": 3, "strides": 3, "padding": "same", "output_padding": 2},
                            {"filters": 2, "kernel_size": 2, "strides": 3},
                            {"filters": 2, "kernel_size": 3, "dilation_rate": 2, "padding": "same"}]):
        c.append((f"conv1dT_{i}", "Conv1DTranspose", kw, [(2, 5, 3)], {}))
        c.append((f"conv2dT_{i}", "Conv2DTranspose", kw, [(2, 4, 5, 3)], {}))
    for i, kw in enumerate([{"kernel_size": 3}, {"kernel_size": 3, "depth_multiplier": 2, "padding": "same"},
                            {"kernel_size": 2, "strides": 2, "padding": "same", "depth_multiplier": 3},
                            {"kernel_size": 3, "dilation_rate": 2, "use_bias": False}]):
        c.append((f"depthwise1d_{i}", "DepthwiseConv1D", kw, [(2, 8, 3)], {}))
        c.append((f"depthwise2d_{i}", "DepthwiseConv2D", kw, [(2, 7, 8, 3)], {}))
        c.append((f"separable1d_{i}", "SeparableConv1D", {"filters": 4, **kw}, [(2, 8, 3)], {}))
        c.append((f"separable2d_{i}", "SeparableConv2D", {"filters": 4, **kw}, [(2, 7, 8, 3)], {}))
    for i, kw in enumerate([{"filters": 2, "kernel_size": 2}, {"filters": 2, "kernel_size": 3, "strides": 2,
                                                              "padding": "same"}]):
        c.append((f"conv3d_{i}", "Conv3D", kw, [(1, 4, 5, 6, 2)], {}))
    for i, (kw, call) in enumerate([({}, {}), ({"use_scale": True}, {"use_causal_mask": True}),
                                    ({"score_mode": "concat"}, {"return_attention_scores": True}),
                                    ({"score_mode": "concat", "use_scale": True}, {"use_causal_mask": True})]):
        c.append((f"attention_{i}", "Attention", kw, [(2, 3, 4), (2, 5, 4)], {"form": "list", "call": call}))
        c.append((f"attention_qvk_{i}", "Attention", kw, [(2, 4, 4), (2, 4, 3), (2, 4, 4)],
                  {"form": "list", "call": call}))
    c.append(("attention_masked", "Attention", {}, [(2, 3, 4), (2, 5, 4)],
              {"form": "list", "call": {"mask": [[[True, True, False]] * 2, [[True, False, True, True, False]] * 2]}}))
    c.append(("additive_attention", "AdditiveAttention", {}, [(2, 3, 4), (2, 5, 4)], {"form": "list"}))
    c.append(("additive_attention_noscale", "AdditiveAttention", {"use_scale": False}, [(2, 3, 4), (2, 5, 4)],
              {"form": "list", "call": {"use_causal_mask": True, "return_attention_scores": True}}))
    for i, kw in enumerate([{"height": 6, "width": 8}, {"height": 3, "width": 2}, {"height": 4, "width": 7},
                            {"height": 6, "width": 8, "interpolation": "nearest"},
                            {"height": 3, "width": 2, "interpolation": "nearest"},
                            {"height": 4, "width": 4, "crop_to_aspect_ratio": True},
                            {"height": 3, "width": 7, "crop_to_aspect_ratio": True, "interpolation": "nearest"}]):
        c.append((f"resizing_{i}", "Resizing", kw, [(2, 5, 6, 2)], {}))
    c.append(("centercrop", "CenterCrop", {"height": 3, "width": 2}, [(2, 6, 5, 2)], {}))
    c.append(("centercrop_unbatched", "CenterCrop", {"height": 2, "width": 4}, [(5, 5, 1)], {}))
    c.append(("timedistributed_dense", "TimeDistributed", {"layer": {"class_name": "Dense", "config": {"units": 3}}},
              [(2, 4, 5)], {}))
    c.append(("timedistributed_conv", "TimeDistributed", {"layer": {"class_name": "Conv1D",
                                                                    "config": {"filters": 2, "kernel_size": 2}}},
              [(2, 3, 5, 2)], {}))
    for kind in ("Max", "Average"):
        for i, kw in enumerate([{"pool_size": 2}, {"pool_size": 3, "strides": 2, "padding": "same"}]):
            c.append((f"{kind.lower()}pool3d_{i}", f"{kind}Pooling3D", kw, [(1, 4, 5, 6, 2)], {}))
        c.append((f"global{kind.lower()}3d", f"Global{kind}Pooling3D", {"keepdims": True}, [(2, 3, 2, 4, 2)], {}))
    for i, kw in enumerate([{"groups": 2}, {"groups": 4, "epsilon": 1e-5}, {"groups": 1, "center": False},
                            {"groups": 2, "axis": 1}]):
        c.append((f"groupnorm_{i}", "GroupNormalization", kw, [(2, 4, 3, 4)], {}))
    return c


CASES = _cases()

# (id, layer class name, kwargs, input shape): model.losses after one call
REGULARIZER_CASES = [
    ("dense_l2", "Dense", {"units": 3, "kernel_regularizer": {"class_name": "L2", "config": {"l2": 0.01}}}, (2, 4)),
    ("dense_l1l2_bias", "Dense", {"units": 3, "kernel_regularizer": {"class_name": "L1L2",
                                                                     "config": {"l1": 0.01, "l2": 0.02}},
                                  "bias_initializer": "ones", "bias_regularizer": {"class_name": "L1",
                                                                                   "config": {"l1": 0.1}}}, (2, 4)),
    ("dense_activity", "Dense", {"units": 3, "activity_regularizer": {"class_name": "L2", "config": {"l2": 0.5}}},
     (5, 4)),
    ("conv_l2", "Conv1D", {"filters": 2, "kernel_size": 2, "kernel_regularizer": "l2"}, (2, 5, 3)),
]

# initializer statistics: (id, name, config, shape)
INITIALIZERS = [
    ("glorot_uniform", "GlorotUniform", {}, (200, 300)), ("glorot_normal", "GlorotNormal", {}, (200, 300)),
    ("he_normal", "HeNormal", {}, (200, 300)), ("he_uniform", "HeUniform", {}, (200, 300)),
    ("lecun_normal", "LecunNormal", {}, (200, 300)), ("lecun_uniform", "LecunUniform", {}, (200, 300)),
    ("random_normal", "RandomNormal", {}, (200, 300)), ("random_uniform", "RandomUniform", {}, (200, 300)),
    ("truncated_normal", "TruncatedNormal", {}, (200, 300)),
    ("vs_fan_avg_uniform", "VarianceScaling", {"scale": 2.0, "mode": "fan_avg", "distribution": "uniform"},
     (3, 3, 20, 30)),
    ("vs_untruncated", "VarianceScaling", {"scale": 1.0, "mode": "fan_out", "distribution": "untruncated_normal"},
     (3, 3, 20, 30)),
    ("orthogonal", "Orthogonal", {}, (40, 60)),
]
