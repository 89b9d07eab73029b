"""The ImageNet-style dataset: a folder of JPEG files, ``train/<class>/<image>.JPEG``.

``source: synthetic`` makes it here, deterministically (image ``i`` depends only on the seed
and ``i``) and in parallel, with ImageNet's shape: a few hundred pixels a side (300-500 x
250-450) and about 107 KB per file (median; 80-140 KB) at JPEG quality 92, so that opening, reading and decoding
one file per sample costs what it costs on the real dataset. A directory path is used in
place: an ImageFolder-style tree (``<dir>/train/<class>/<images>`` or ``<dir>/<class>/<images>``)
checked for structure.

Bad input never stops the sweep: :func:`prepare_imagenet` writes ``dataset.json`` with
``status: failed`` and the reason (naming the path), and every point that needs the dataset
is reported failed with that reason.
"""

from __future__ import annotations

import io
import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
DESCRIPTION = "dataset.json"


class ImageTreeError(ValueError):
    """A directory that is not an image tree the loaders can read; the message names it."""


def class_name(c: int) -> str:
    return f"n{c:08d}"  # WordNet-id-like, as ImageNet's folders are named


def synthetic_jpeg(index: int, seed: int, scale: float = 1.0) -> bytes:
    """Image ``index`` of the synthetic set: smooth colour fields with grain, like a photo
    compresses, so the JPEG is about ImageNet's size (``scale`` times its sides: a heavier
    decode a sample)."""
    from PIL import Image

    rng = np.random.default_rng([seed, index])
    w, h = int(rng.integers(300, 500)), int(rng.integers(250, 450))
    w, h = round(w * scale), round(h * scale)
    coarse = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
    img = np.asarray(Image.fromarray(coarse).resize((w, h), Image.Resampling.BICUBIC), np.int16)
    img = np.clip(img + rng.integers(-52, 53, img.shape), 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(img).save(out, format="JPEG", quality=92)
    return out.getvalue()


def _write_images(args: tuple[str, int, int, int, int, float]) -> int:
    """Write images [lo, hi) of the synthetic set under ``root``; returns the bytes written."""
    root, lo, hi, per_class, seed, scale = args
    total = 0
    for i in range(lo, hi):
        c, k = divmod(i, per_class)
        d = Path(root) / "train" / class_name(c)
        d.mkdir(parents=True, exist_ok=True)
        data = synthetic_jpeg(i, seed, scale)
        (d / f"{class_name(c)}_{k}.JPEG").write_bytes(data)
        total += len(data)
    return total


def make_synthetic(
    out: Path,
    classes: int,
    per_class: int,
    seed: int,
    workers: int = 0,
    log=print,
    scale: float = 1.0,
) -> None:
    """Write ``classes`` x ``per_class`` JPEGs under ``out/train``, in ``workers`` processes."""
    n = classes * per_class
    workers = workers or os.cpu_count() or 1
    chunk = max(1, min(256, n // (workers * 4) or 1))
    jobs = [(str(out), lo, min(n, lo + chunk), per_class, seed, scale) for lo in range(0, n, chunk)]
    log(f"generating {n} synthetic JPEGs ({classes} classes) in {workers} processes")
    done = 0
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for i, _ in enumerate(pool.map(_write_images, jobs), 1):
            done += 1
            if i % max(1, len(jobs) // 10) == 0 or i == len(jobs):
                log(f"  {min(n, i * chunk)}/{n} images")


def find_train_root(root: Path) -> Path:
    """The folder whose subfolders are the classes: ``root/train`` if there is one, else root."""
    root = Path(root)
    if not root.is_dir():
        raise ImageTreeError(f"{root}: no such directory")
    return root / "train" if (root / "train").is_dir() else root


def scan(root: Path) -> dict[str, Any]:
    """Classes, files and bytes of an image tree; ImageTreeError if it holds no images."""
    train = find_train_root(root)
    classes = sorted(d.name for d in train.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise ImageTreeError(f"{train}: no class folders (expected {train}/<class>/<images>)")
    files = 0
    size = 0
    empty = []
    for c in classes:
        n = 0
        for e in os.scandir(train / c):
            if e.is_file() and e.name.lower().endswith(IMAGE_SUFFIXES):
                n += 1
                size += e.stat().st_size
        if n == 0:
            empty.append(c)
        files += n
    if files == 0:
        raise ImageTreeError(
            f"{train}: no images in its {len(classes)} class folders (looked for {', '.join(IMAGE_SUFFIXES)})"
        )
    return {
        # absolute: tracers select by path prefix (DFTRACER_DATA_DIR, Darshan's NAME_INCLUDE),
        # so a relative path handed to the job would leave its reads untraced
        "root": str(train.resolve()),
        "classes": len(classes),
        "files": files,
        "bytes": size,
        "empty_classes": empty[:20],
    }


def prepare_imagenet(
    out: Path,
    source: str = "synthetic",
    classes: int = 8,
    images_per_class: int = 96,
    seed: int = 0,
    workers: int = 0,
    log=print,
    image_scale: float = 1.0,
) -> dict[str, Any]:
    """Make (or check) the dataset; write and return its description (``out/dataset.json``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    desc: dict[str, Any] = {"workload": "imagenet", "source": source, "status": "ok", "reason": ""}
    try:
        if source == "synthetic":
            want: dict[str, float] = {
                "classes": classes,
                "images_per_class": images_per_class,
                "seed": seed,
            }
            if image_scale != 1:  # sets made before the setting existed stay valid
                want["image_scale"] = image_scale
            if _existing(out) != want:  # made once; remade only when its parameters change
                make_synthetic(out, classes, images_per_class, seed, workers, log, image_scale)
            desc |= want
            info = scan(out)
        else:
            info = scan(Path(source).expanduser())
        desc |= info
        log(
            f"{info['root']}: {info['files']} images in {info['classes']} classes, {info['bytes'] / 1e6:.1f} MB"
        )
    except (ImageTreeError, OSError) as e:
        desc |= {"status": "failed", "reason": f"dataset.imagenet: {e}"}
        log(desc["reason"])
    (out / DESCRIPTION).write_text(json.dumps(desc, indent=1) + "\n")
    return desc


def _existing(out: Path) -> dict[str, Any] | None:
    """The parameters of a synthetic set already in ``out`` (from its description)."""
    try:
        d = json.loads((out / DESCRIPTION).read_text())
    except (OSError, ValueError):
        return None
    if d.get("status") != "ok" or d.get("source") != "synthetic":
        return None
    have = {k: d.get(k) for k in ("classes", "images_per_class", "seed")}
    if d.get("image_scale", 1) != 1:
        have["image_scale"] = d["image_scale"]
    return have
