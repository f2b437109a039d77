"""``md.data.experimental.make_csv_dataset`` as tf.data's (load_data/csv tutorial): an ordered dict of
column batches with the label popped, TF's type inference (int32, float32, strings), ``select_columns`` /
``column_defaults``, GZIP files, ``num_epochs`` and ``ignore_errors``. TF's values below were observed
with tensorflow-cpu 2.21 on the same file.
"""

import gzip

import pytest
import torch

import multidev as md

CSV = ("survived,sex,age,n_siblings,fare,deck\n0,male,22.0,1,7.25,unknown\n1,female,38,1,71.2833,C\n"
       "1,female,26.0,0,7.925,unknown\n1,female,35.0,1,53.1,C\n0,male,28.0,0,8.4583,unknown\n")


@pytest.fixture(scope="module")
def titanic(tmp_path_factory):
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_text(CSV)
    with gzip.open(str(path) + ".gz", "wt") as f:
        f.write(CSV)
    return str(path)


def test_columns_types_and_label_are_tfs(titanic):
    ds = md.data.experimental.make_csv_dataset(titanic, batch_size=2, label_name="survived", num_epochs=1,
                                               ignore_errors=True, shuffle=False)
    batches = list(ds)
    assert len(batches) == 3   # num_epochs=1 keeps the last partial batch
    features, label = batches[0]
    assert list(features) == ["sex", "age", "n_siblings", "fare", "deck"]   # TF's order, label popped
    assert [str(v) for v in features["sex"]] == ["male", "female"]         # TF: [b'male', b'female']
    assert features["age"].dtype == torch.float32 and features["age"].tolist() == [22.0, 38.0]
    assert features["n_siblings"].dtype == torch.int32 and label.dtype == torch.int32 and label.tolist() == [0, 1]
    assert features["fare"].tolist() == pytest.approx([7.25, 71.2833023071289])
    assert [b[1].tolist() for b in batches[1:]] == [[1, 1], [0]]


def test_select_columns_defaults_gzip_and_repeat(titanic):
    ds = md.data.experimental.make_csv_dataset(titanic + ".gz", batch_size=2, compression_type="GZIP", shuffle=False,
                                               select_columns=["fare", "survived"], column_defaults=[0, 0.0])
    got = [(b["survived"].tolist(), b["fare"].dtype) for b in ds.take(3)]
    assert list(next(iter(ds))) == ["survived", "fare"]   # file order, as TF
    assert got == [([0, 1], torch.float32), ([1, 1], torch.float32), ([0, 0], torch.float32)]   # repeats forever
    shuffled = md.data.experimental.make_csv_dataset(titanic, batch_size=2, num_epochs=2, shuffle_seed=1,
                                                     label_name="survived")
    labels = [v for _, y in shuffled for v in y.tolist()]
    assert len(labels) == 10 and sum(labels) == 6


def test_bad_input_says_why(titanic, tmp_path):
    make = md.data.experimental.make_csv_dataset
    with pytest.raises(ValueError, match="label_name 'Survived' is not one of the columns"):
        make(titanic, batch_size=2, label_name="Survived")
    with pytest.raises(ValueError, match="no files match"):
        make(str(tmp_path / "none*.csv"), batch_size=2)
    with pytest.raises(ValueError, match="2 column_defaults for 6 columns"):
        make(titanic, batch_size=2, column_defaults=[0, 0.0])
    with pytest.raises(ValueError, match="compression_type"):
        make(titanic, batch_size=2, compression_type="BZ2")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,x\n4,5\n")
    with pytest.raises(ValueError, match="ignore_errors=True"):
        make(str(bad), batch_size=2, column_defaults=[0, 0])
    kept = make(str(bad), batch_size=4, column_defaults=[0, 0], ignore_errors=True, num_epochs=1, shuffle=False)
    assert next(iter(kept))["a"].tolist() == [1, 4]
