"""keras.io/examples/vision/attention_mil_classification as printed (Keras 3): ``MILAttentionLayer`` (weights
made in ``build`` from ``input_shape[0][1]`` of a LIST of inputs, each ``add_weight(..., regularizer=...)`` with
``keras.regularizers.L2(0.01)`` through ``keras.regularizers.get``, gated by a sigmoid; ``call`` maps a list of
instances to a list of attention weights: ``ops.tensordot(axes=1)``, ``ops.stack``, ``ops.softmax(axis=0)`` over
the bag, ``alpha[i] for i in range(alpha.shape[0])``); a model of ``BAG_SIZE`` inputs sharing two Dense layers,
``layers.multiply`` and ``layers.concatenate``; ``compute_class_weights`` given to ``fit(class_weight=...)`` with
``batch_size=1``, ``EarlyStopping`` and a best-only ``.weights.h5`` reloaded by ``load_weights``; an ensemble of
models; ``predict`` of an intermediate ``keras.Model(model.input, model.get_layer("alpha").output)``.

``batch_size=1`` on 2 replicas: one replica's slice of each one-example batch is empty (TensorFlow's
MirroredStrategy splits a batch of 1 the same way). Shrunk: bags of 3 8x8 instances (7 of 28x28), Dense 16/8
(128/64), attention dim 16 (256), 8 training and 4 validation bags, 2 models, 2 epochs.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/vision/attention_mil_classification/"


def create_bags(input_data, input_labels, positive_class, bag_count, instance_count, rng):
    bags, bag_labels = [], []
    input_data = np.divide(input_data, 255.0)
    count = 0
    for _ in range(bag_count):
        index = rng.choice(input_data.shape[0], instance_count, replace=False)
        instances_data = input_data[index]
        instances_labels = input_labels[index]
        bag_label = 0
        if positive_class in instances_labels:
            bag_label = 1
            count += 1
        bags.append(instances_data)
        bag_labels.append(np.array([bag_label]))
    return (list(np.swapaxes(bags, 0, 1)), np.array(bag_labels))


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    POSITIVE_CLASS, BAG_COUNT, VAL_BAG_COUNT, BAG_SIZE, ENSEMBLE_AVG_COUNT = 1, 8 * scale, 4, 3, 2

    class MILAttentionLayer(layers.Layer):
        def __init__(self, weight_params_dim, kernel_initializer="glorot_uniform", kernel_regularizer=None,
                     use_gated=False, **kwargs):
            super().__init__(**kwargs)
            self.weight_params_dim = weight_params_dim
            self.use_gated = use_gated
            self.kernel_initializer = keras.initializers.get(kernel_initializer)
            self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
            self.v_init = self.kernel_initializer
            self.w_init = self.kernel_initializer
            self.u_init = self.kernel_initializer
            self.v_regularizer = self.kernel_regularizer
            self.w_regularizer = self.kernel_regularizer
            self.u_regularizer = self.kernel_regularizer

        def build(self, input_shape):
            input_dim = input_shape[0][1]
            self.v_weight_params = self.add_weight(shape=(input_dim, self.weight_params_dim), initializer=self.v_init,
                                                   name="v", regularizer=self.v_regularizer, trainable=True)
            self.w_weight_params = self.add_weight(shape=(self.weight_params_dim, 1), initializer=self.w_init,
                                                   name="w", regularizer=self.w_regularizer, trainable=True)
            if self.use_gated:
                self.u_weight_params = self.add_weight(shape=(input_dim, self.weight_params_dim),
                                                       initializer=self.u_init, name="u",
                                                       regularizer=self.u_regularizer, trainable=True)
            else:
                self.u_weight_params = None
            self.input_built = True

        def call(self, inputs):
            instances = [self.compute_attention_scores(instance) for instance in inputs]
            instances = ops.stack(instances)
            alpha = ops.softmax(instances, axis=0)
            return [alpha[i] for i in range(alpha.shape[0])]

        def compute_attention_scores(self, instance):
            original_instance = instance
            instance = ops.tanh(ops.tensordot(instance, self.v_weight_params, axes=1))
            if self.use_gated:
                instance = instance * ops.sigmoid(ops.tensordot(original_instance, self.u_weight_params, axes=1))
            return ops.tensordot(instance, self.w_weight_params, axes=1)

    def create_model(instance_shape):
        inputs, embeddings = [], []
        shared_dense_layer_1 = layers.Dense(16, activation="relu")
        shared_dense_layer_2 = layers.Dense(8, activation="relu")
        for _ in range(BAG_SIZE):
            inp = layers.Input(instance_shape)
            flatten = layers.Flatten()(inp)
            dense_1 = shared_dense_layer_1(flatten)
            dense_2 = shared_dense_layer_2(dense_1)
            inputs.append(inp)
            embeddings.append(dense_2)
        alpha = MILAttentionLayer(weight_params_dim=16, kernel_regularizer=keras.regularizers.L2(0.01),
                                  use_gated=True, name="alpha")(embeddings)
        multiply_layers = [layers.multiply([alpha[i], embeddings[i]]) for i in range(len(alpha))]
        concat = layers.concatenate(multiply_layers, axis=1)
        output = layers.Dense(2, activation="softmax")(concat)
        return keras.Model(inputs, output)

    def compute_class_weights(labels):
        negative_count = len(np.where(labels == 0)[0])
        positive_count = len(np.where(labels == 1)[0])
        total_count = negative_count + positive_count
        return {0: (1 / negative_count) * (total_count / 2), 1: (1 / positive_count) * (total_count / 2)}

    def train(train_data, train_labels, val_data, val_labels, model):
        file_path = os.path.join(workdir, "best_model.weights.h5")
        model_checkpoint = keras.callbacks.ModelCheckpoint(file_path, monitor="val_loss", verbose=0, mode="min",
                                                           save_best_only=True, save_weights_only=True)
        early_stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=10, mode="min")
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        history = model.fit(train_data, train_labels, validation_data=(val_data, val_labels), epochs=2,
                            class_weight=compute_class_weights(train_labels), batch_size=1,
                            callbacks=[early_stopping, model_checkpoint], verbose=0)
        model.load_weights(file_path)
        histories.append(history.history)
        return model

    def predict(data, labels, trained_models):
        models_predictions, models_attention_weights, models_losses, models_accuracies = [], [], [], []
        for model in trained_models:
            predictions = model.predict(data, verbose=0)
            models_predictions.append(predictions)
            intermediate_model = keras.Model(model.input, model.get_layer("alpha").output)
            intermediate_predictions = intermediate_model.predict(data, verbose=0)
            attention_weights = np.squeeze(np.swapaxes(intermediate_predictions, 1, 0))
            models_attention_weights.append(attention_weights)
            loss, accuracy = model.evaluate(data, labels, verbose=0)
            models_losses.append(loss)
            models_accuracies.append(accuracy)
        return (np.sum(models_predictions, axis=0) / ENSEMBLE_AVG_COUNT,
                np.sum(models_attention_weights, axis=0) / ENSEMBLE_AVG_COUNT, models_losses, models_accuracies)

    rng = np.random.RandomState(0)
    x = (rng.rand(200, 8, 8) * 128).astype("float32")
    y = rng.randint(0, 6, 200)
    x[y == POSITIVE_CLASS, 2:6, 2:6] += 120.0
    train_data, train_labels = create_bags(x[:150], y[:150], POSITIVE_CLASS, BAG_COUNT, BAG_SIZE, rng)
    val_data, val_labels = create_bags(x[150:], y[150:], POSITIVE_CLASS, VAL_BAG_COUNT, BAG_SIZE, rng)
    keras.utils.set_random_seed(0)
    histories = []
    instance_shape = train_data[0][0].shape
    with strategy.scope():
        models = [create_model(instance_shape) for _ in range(ENSEMBLE_AVG_COUNT)]
        trained_models = [train(train_data, train_labels, val_data, val_labels, model) for model in models]
    class_predictions, attention_params, losses, accuracies = predict(val_data, val_labels, trained_models)
    return {"_model": trained_models[0], "history": histories, "predictions": class_predictions,
            "attention": attention_params, "losses": losses, "accuracies": accuracies}
