"""A layer's weight penalties count in a process that never ran its ``add_weight``.

``model.losses`` skips its walk over the layers until some layer of the process has recorded a loss or has a weight
penalty (a per-step saving). A model unpickled in another process (a parameter-server worker receives the
coordinator's model inside a scheduled function) or deep-copied there had penalties the flag never heard of: the
worker trained without its L2 terms (``test_tutorial_learning`` caught it, 3.4 off after 20 steps).
"""

from __future__ import annotations

from tests.conftest import run_fresh


def test_weight_penalties_of_an_unpickled_model_count(tmp_path):
    saved = tmp_path / "model.pkl"
    run_fresh(f"""
        import pickle, multidev as md
        model = md.keras.Sequential([md.keras.Input((3,)), md.keras.layers.Dense(2, kernel_regularizer="l2")])
        open({str(saved)!r}, "wb").write(pickle.dumps(model))
        """)
    out = run_fresh(f"""
        import copy, pickle
        model = pickle.loads(open({str(saved)!r}, "rb").read())   # a test reading its own file
        assert len(model.losses) == 1, model.losses
        assert len(copy.deepcopy(model).losses) == 1
        print("OK")
        """)
    assert "OK" in out.stdout
