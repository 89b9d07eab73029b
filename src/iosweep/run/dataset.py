"""MNIST in its original file formats: IDX for PyTorch, ``mnist.npz`` for TensorFlow.

Without network the default is a *synthetic* MNIST: deterministic (seeded), the real shapes
and file sizes (60000 + 10000 images of 28x28, uint8) and learnable (each class is a distinct
stroke pattern, jittered and noised), so the accuracy a training run prints means something.
``source: download`` fetches the real files and checks their MD5s; a directory uses files
already there (``.gz`` or raw) and checks what can be checked.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import struct
import urllib.request
from pathlib import Path

import numpy as np

IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
# MD5 of the published .gz files (as torchvision checks them).
MNIST_GZ_MD5 = {
    "train-images-idx3-ubyte": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte": "ec29112dd5afa0611ce80d1b7f02629c",
}
_IDX_UBYTE = 0x08


class DatasetError(RuntimeError):
    pass


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as an IDX file (big-endian magic 0x0000 08 <ndim>, then dims)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">BBBB", 0, 0, _IDX_UBYTE, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    with open(path, "wb") as f:
        f.write(header)
        f.write(array.tobytes())


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file whole, the way torchvision does (one read of the whole file)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != _IDX_UBYTE:
        raise DatasetError(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise DatasetError(f"{path}: header says {dims} but holds {body.size} bytes of data")
    return body.reshape(dims)


def _class_templates(rng: np.random.Generator) -> np.ndarray:
    """Ten 28x28 templates, each a few random thick strokes: distinct, digit-like classes."""
    yy, xx = np.mgrid[0:28, 0:28].astype(np.float32)
    templates = np.zeros((10, 28, 28), np.float32)
    for c in range(10):
        for _ in range(3):
            (x0, y0), (x1, y1) = rng.uniform(6, 22, size=(2, 2))
            t = np.linspace(0, 1, 24)[:, None, None]
            px, py = x0 + (x1 - x0) * t, y0 + (y1 - y0) * t
            d2 = (xx[None] - px) ** 2 + (yy[None] - py) ** 2
            templates[c] = np.maximum(templates[c], np.exp(-d2 / 3.0).max(axis=0))
    return templates


def synthetic_mnist(n: int, seed: int, templates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    images = np.empty((n, 28, 28), np.uint8)
    chunk = 5000  # bounded memory: float32 work arrays of chunk x 28 x 28
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        base = templates[labels[lo:hi]]
        shifts = rng.integers(-2, 3, size=(hi - lo, 2))
        for i, (dy, dx) in enumerate(shifts):
            base[i] = np.roll(base[i], (dy, dx), axis=(0, 1))
        scale = rng.uniform(0.7, 1.0, size=(hi - lo, 1, 1)).astype(np.float32)
        noise = rng.normal(0, 0.15, size=base.shape).astype(np.float32)
        images[lo:hi] = np.clip((base * scale + noise) * 255, 0, 255).astype(np.uint8)
    return images, labels


def _md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _gunzip(src: Path, dst: Path) -> None:
    with gzip.open(src, "rb") as fin, open(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout)


def _fetch_real(source: str, url: str, out: Path, log) -> str:
    """Put the four real IDX files into ``out``; returns how they were verified."""
    verified = []
    for name in IDX_FILES.values():
        gz = out / f"{name}.gz"
        if source == "download":
            log(f"downloading {url}{name}.gz")
            try:
                urllib.request.urlretrieve(f"{url}{name}.gz", gz)
            except OSError as e:
                raise DatasetError(f"cannot download {url}{name}.gz: {e}") from e
        else:
            src_dir = Path(source).expanduser()
            if (src_dir / f"{name}.gz").exists():
                shutil.copyfile(src_dir / f"{name}.gz", gz)
            elif (src_dir / name).exists():
                shutil.copyfile(src_dir / name, out / name)
                read_idx(out / name)  # no published checksum for raw files: check the structure
                verified.append(f"{name}: IDX structure (no published checksum for raw files)")
                continue
            else:
                raise DatasetError(f"dataset.source {source}: neither {name}.gz nor {name} found")
        digest = _md5(gz)
        if digest != MNIST_GZ_MD5[name]:
            raise DatasetError(
                f"{gz}: MD5 {digest} does not match MNIST's {MNIST_GZ_MD5[name]}; "
                "corrupt download or not the MNIST file"
            )
        _gunzip(gz, out / name)
        gz.unlink()
        verified.append(f"{name}: MD5 of .gz matches")
    return "; ".join(verified)


def prepare_dataset(
    out: Path,
    source: str = "synthetic",
    seed: int = 0,
    train_size: int = 60000,
    test_size: int = 10000,
    npz_copies: int = 0,
    url: str = "https://ossci-datasets.s3.amazonaws.com/mnist/",
    log=print,
) -> dict:
    """Write the dataset into ``out``; returns (and writes ``dataset.json``) a description.

    ``npz_copies`` > 0 also writes ``mnist-<r>.npz`` for r < npz_copies: the TensorFlow job
    gives every rank its own copy, as Horovod's tensorflow2_mnist.py does.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if source == "synthetic":
        rng = np.random.default_rng(seed)
        templates = _class_templates(rng)
        log(
            f"generating synthetic MNIST: {train_size} train + {test_size} test images, seed {seed}"
        )
        x_train, y_train = synthetic_mnist(train_size, seed + 1, templates)
        x_test, y_test = synthetic_mnist(test_size, seed + 2, templates)
        for key, arr in {
            "train_images": x_train,
            "train_labels": y_train,
            "test_images": x_test,
            "test_labels": y_test,
        }.items():
            write_idx(out / IDX_FILES[key], arr)
        verified = f"synthetic, seed {seed}"
    else:
        verified = _fetch_real(source, url, out, log)
        x_train, y_train = (
            read_idx(out / IDX_FILES["train_images"]),
            read_idx(out / IDX_FILES["train_labels"]),
        )
        x_test, y_test = (
            read_idx(out / IDX_FILES["test_images"]),
            read_idx(out / IDX_FILES["test_labels"]),
        )
    np.savez_compressed(
        out / "mnist.npz", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test
    )
    for r in range(npz_copies):
        shutil.copyfile(out / "mnist.npz", out / f"mnist-{r}.npz")
    files = sorted(p.name for p in out.iterdir() if p.name != "dataset.json")
    desc = {
        "source": source,
        "verified": verified,
        "train_size": len(y_train),
        "test_size": len(y_test),
        "files": {f: (out / f).stat().st_size for f in files},
        "md5": {f: _md5(out / f) for f in files if not f.startswith("mnist-")},
    }
    (out / "dataset.json").write_text(json.dumps(desc, indent=2) + "\n")
    log(f"dataset ready in {out}: {', '.join(files)}")
    return desc
