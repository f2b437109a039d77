"""p115 (keras.io's earlier GAT, its own ``train_step`` calling the model on the whole graph) with the one line md.keras's
error on replicas asks for: ``gat_model([node_states, edges])`` in the strategy's scope before ``compile``/``fit``."""

from tests.programs.keras import p115_gat_train_step

SOURCE = p115_gat_train_step.SOURCE


def run(keras, strategy, workdir, scale=1):
    return p115_gat_train_step.run(keras, strategy, workdir, scale, build_first=True)
