"""The MNIST dataset in its original formats: synthetic, local files, checksum failures."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from iosweep.run.dataset import IDX_FILES, DatasetError, prepare_dataset, read_idx, write_idx


def quiet(_msg):
    pass


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("mnist")
    desc = prepare_dataset(out, train_size=3000, test_size=500, npz_copies=2, log=quiet)
    return out, desc


def test_idx_roundtrip(tmp_path):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "x", a)
    assert (tmp_path / "x").stat().st_size == 4 + 3 * 4 + a.size
    np.testing.assert_array_equal(read_idx(tmp_path / "x"), a)
    (tmp_path / "bad").write_bytes(b"\x00\x00\x0d\x01abcd")
    with pytest.raises(DatasetError, match="not an unsigned-byte IDX"):
        read_idx(tmp_path / "bad")


def test_synthetic_has_mnist_formats_and_copies(small):
    out, desc = small
    assert read_idx(out / IDX_FILES["train_images"]).shape == (3000, 28, 28)
    assert read_idx(out / IDX_FILES["test_labels"]).shape == (500,)
    with np.load(out / "mnist-1.npz") as f:
        assert set(f.files) == {"x_train", "y_train", "x_test", "y_test"}
        assert f["x_train"].shape == (3000, 28, 28) and f["x_train"].dtype == np.uint8
    assert (out / "mnist-0.npz").read_bytes() == (out / "mnist.npz").read_bytes()
    assert json.loads((out / "dataset.json").read_text())["train_size"] == 3000
    assert desc["verified"] == "synthetic, seed 0"


def test_synthetic_is_deterministic(tmp_path, small):
    _, desc = small
    again = prepare_dataset(tmp_path, train_size=3000, test_size=500, log=quiet)
    assert again["md5"][IDX_FILES["train_images"]] == desc["md5"][IDX_FILES["train_images"]]
    other = prepare_dataset(tmp_path / "s1", seed=1, train_size=3000, test_size=500, log=quiet)
    assert other["md5"][IDX_FILES["train_images"]] != desc["md5"][IDX_FILES["train_images"]]


@pytest.mark.slow
def test_full_size_files_match_mnist(tmp_path):
    prepare_dataset(tmp_path, log=quiet)
    sizes = {name: (tmp_path / name).stat().st_size for name in IDX_FILES.values()}
    # the byte sizes of the real MNIST files
    assert sizes == {
        "train-images-idx3-ubyte": 47040016,
        "train-labels-idx1-ubyte": 60008,
        "t10k-images-idx3-ubyte": 7840016,
        "t10k-labels-idx1-ubyte": 10008,
    }


def test_synthetic_is_learnable(small):
    """A nearest-class-mean classifier fit on train must do far better than chance on test."""
    out, _ = small
    x = read_idx(out / IDX_FILES["train_images"]).reshape(-1, 784).astype(np.float32)
    y = read_idx(out / IDX_FILES["train_labels"])
    xt = read_idx(out / IDX_FILES["test_images"]).reshape(-1, 784).astype(np.float32)
    yt = read_idx(out / IDX_FILES["test_labels"])
    means = np.stack([x[y == c].mean(axis=0) for c in range(10)])
    pred = np.argmin(((xt[:, None, :] - means[None]) ** 2).sum(axis=2), axis=1)
    assert (pred == yt).mean() > 0.6  # chance is 0.1


def test_local_raw_idx_directory(tmp_path, small):
    out, _ = small
    src = tmp_path / "mine"
    src.mkdir()
    for name in IDX_FILES.values():
        (src / name).write_bytes((out / name).read_bytes())
    desc = prepare_dataset(tmp_path / "ds", source=str(src), log=quiet)
    assert desc["train_size"] == 3000
    assert "IDX structure" in desc["verified"]


def test_local_gz_with_wrong_checksum_is_named(tmp_path, small):
    out, _ = small
    src = tmp_path / "mine"
    src.mkdir()
    for name in IDX_FILES.values():
        with gzip.open(src / f"{name}.gz", "wb") as f:
            f.write((out / name).read_bytes())
    with pytest.raises(DatasetError, match=r"train-images-idx3-ubyte\.gz: MD5 .* does not match"):
        prepare_dataset(tmp_path / "ds", source=str(src), log=quiet)


def test_local_directory_missing_files(tmp_path):
    with pytest.raises(DatasetError, match=r"neither train-images-idx3-ubyte\.gz nor"):
        prepare_dataset(tmp_path / "ds", source=str(tmp_path), log=quiet)


def test_imagenet_tree_made_at_a_relative_path_is_given_to_the_job_absolute(tmp_path, monkeypatch):
    # The workflow makes it under the relative `results/`: a relative path handed to the job
    # made TF's tf.io.read_file open relative names, which DFTracer's DATA_DIR prefix (and
    # Darshan's NAME_INCLUDE) do not match, so the default sweep traced no TF dataset reads.
    from iosweep.config import expand_sweep, validate_config
    from iosweep.run.imagenet import prepare_imagenet
    from iosweep.run.runner import describe_data

    monkeypatch.chdir(tmp_path)
    desc = prepare_imagenet(Path("ds"), classes=2, images_per_class=2, log=quiet)
    assert desc["status"] == "ok" and desc["root"] == str(tmp_path / "ds" / "train")
    config = validate_config({"sweep": {"workloads": ["imagenet"], "include": []}})
    point = expand_sweep(config)[0]
    assert describe_data(point, Path("ds"))["path"] == str(tmp_path / "ds" / "train")
    # a description written before, with a relative root, is resolved as well
    old = json.loads((tmp_path / "ds" / "dataset.json").read_text()) | {"root": "ds/train"}
    (tmp_path / "ds" / "dataset.json").write_text(json.dumps(old))
    assert describe_data(point, Path("ds"))["path"] == str(tmp_path / "ds" / "train")
