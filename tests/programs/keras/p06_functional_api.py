"""keras.io/guides/functional_api: the ticket-ranking model (3 inputs, 2 named outputs, weighted losses).

Shrunk: vocabulary 50, 12 tags, 4 departments, embeddings of 8, LSTMs of 8/4 units, 64 tickets.
"""

import numpy as np

SOURCE = "https://keras.io/guides/functional_api/#models-with-multiple-inputs-and-outputs"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    num_tags, num_words, num_departments = 12, 50, 4
    keras.utils.set_random_seed(0)
    with strategy.scope():
        title_input = keras.Input(shape=(None,), name="title")
        body_input = keras.Input(shape=(None,), name="body")
        tags_input = keras.Input(shape=(num_tags,), name="tags")
        title_features = layers.Embedding(num_words, 8)(title_input)
        body_features = layers.Embedding(num_words, 8)(body_input)
        title_features = layers.LSTM(8)(title_features)
        body_features = layers.LSTM(4)(body_features)
        x = layers.concatenate([title_features, body_features, tags_input])
        priority_pred = layers.Dense(1, name="priority")(x)
        department_pred = layers.Dense(num_departments, name="department")(x)
        model = keras.Model(inputs=[title_input, body_input, tags_input],
                            outputs={"priority": priority_pred, "department": department_pred})
        model.compile(optimizer=keras.optimizers.RMSprop(1e-3),
                      loss={"priority": keras.losses.BinaryCrossentropy(from_logits=True),
                            "department": keras.losses.CategoricalCrossentropy(from_logits=True)},
                      loss_weights={"priority": 1.0, "department": 0.2})
    rng = np.random.RandomState(0)
    n = 64 * scale
    title_data = rng.randint(num_words, size=(n, 10))
    body_data = rng.randint(num_words, size=(n, 20))
    tags_data = rng.randint(2, size=(n, num_tags)).astype("float32")
    priority_targets = rng.random_sample(size=(n, 1)).astype("float32")
    dept_targets = rng.randint(2, size=(n, num_departments)).astype("float32")
    history = model.fit({"title": title_data, "body": body_data, "tags": tags_data},
                        {"priority": priority_targets, "department": dept_targets}, epochs=2, batch_size=16,
                        verbose=0)
    out = model.predict({"title": title_data[:4], "body": body_data[:4], "tags": tags_data[:4]}, verbose=0)
    return {"_model": model, "history": history.history, "priority": out["priority"], "department": out["department"]}
