"""multidev's warnings name the program's line (the fit call, the strategy constructor), not the
multidev source line that raised them, at whatever depth inside multidev they start."""

from __future__ import annotations

import warnings

import numpy as np

import multidev as md
from multidev._core.user_warnings import warn_user


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return caught


def test_a_warning_deep_in_fit_names_the_fit_line():
    model = md.keras.Sequential([md.keras.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((8, 2), "float32"), np.ones((8, 1), "float32")
    caught = _caught(lambda: model.fit(x, y, epochs=2, verbose=0,
                                       callbacks=[md.keras.callbacks.EarlyStopping(monitor="val_acc")]))
    assert [w.filename for w in caught] == [__file__, __file__], [(w.filename, str(w.message)) for w in caught]
    assert "`val_acc` which is not available" in str(caught[0].message)
    assert caught[0].category is UserWarning


def test_warn_user_from_the_program_names_the_program_and_keeps_the_category():
    caught = _caught(lambda: warn_user("x", RuntimeWarning))
    assert len(caught) == 1 and caught[0].filename == __file__ and caught[0].category is RuntimeWarning


def test_a_warning_on_a_multidev_thread_keeps_multidevs_line():
    """No program frame on the stack (a replica thread): the line of the multidev code that warned,
    not threading.py's."""
    import threading

    from multidev.keras.callbacks import monitor

    def on_a_thread():
        thread = threading.Thread(target=monitor.get_monitor_value, args=({}, "x", "T"))   # no test frame on it
        thread.start()
        thread.join()

    caught = _caught(on_a_thread)
    assert len(caught) == 1 and caught[0].filename == monitor.__file__, [w.filename for w in caught]
