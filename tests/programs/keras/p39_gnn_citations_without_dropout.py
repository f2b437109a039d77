"""keras.io/examples/graph/gnn_citations (p38) with ``dropout_rate=0``: its Dropout draws over the graph's
nodes (each replica its own mask, as on TensorFlow's replicas) are the only reason p38 differs from one
device; the gathers, segment sums, whole-graph BatchNormalization and l2 normalisation equal it.
"""

from tests.programs.keras import p38_gnn_citations

SOURCE = p38_gnn_citations.SOURCE


def run(keras, strategy, workdir, scale=1):
    return p38_gnn_citations.run(keras, strategy, workdir, scale, dropout_rate=0.0)
