"""Horovod + TensorFlow 2 on an ImageNet-style JPEG folder, through ``tf.data``.

Every epoch the file list is shuffled (the same permutation on every rank, seeded by the
epoch) and sharded by rank, so each rank reads a disjoint part of the files and a different
part each epoch; ``map(num_parallel_calls=W)`` reads (``tf.io.read_file``), decodes
(``decode_jpeg``) and crops each file, then batches are prefetched (W = 0: no parallelism,
no prefetch). A ResNet-18 (basic blocks, as He et al. and the PyTorch workload's, in Keras
layers) or Keras' ResNet50 (``weights=None``) trains with a ``DistributedGradientTape``;
rank 0 writes a TF checkpoint (model and optimizer) after every epoch.

Each step records its compute and, apart, the time the rank waited for that batch; under
DFTracer the two are also app-level events (``fetch``, ``compute``).
"""

from __future__ import annotations

import os
import sys
import time

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from iosweep.run.training import base_parser
from iosweep.run.training.imagefiles import Annotations, image_files
from iosweep.run.training.progress import Progress

MEAN = (0.485, 0.456, 0.406)  # tensors only inside main: TF's threads are set first
STD = (0.229, 0.224, 0.225)


def resnet18(tf, shape: tuple[int, int, int], classes: int):
    """ResNet-18 in Keras layers: the PyTorch workload's network (basic blocks, 2-2-2-2)."""
    L = tf.keras.layers

    def conv_bn(x, width: int, k: int, stride: int):
        x = L.Conv2D(width, k, stride, padding="same", use_bias=False)(x)
        return L.BatchNormalization()(x)

    inp = L.Input(shape)
    x = L.MaxPool2D(3, 2, padding="same")(L.ReLU()(conv_bn(inp, 64, 7, 2)))
    cin = 64
    for i in range(4):
        width = 64 * 2**i
        for j in range(2):
            stride = 2 if j == 0 and i > 0 else 1
            y = conv_bn(L.ReLU()(conv_bn(x, width, 3, stride)), width, 3, 1)
            skip = x if stride == 1 and cin == width else conv_bn(x, width, 1, stride)
            x, cin = L.ReLU()(L.Add()([y, skip])), width
    out = L.Dense(classes, activation="softmax")(L.GlobalAveragePooling2D()(x))
    return tf.keras.Model(inp, out)


def parse_args(argv=None):
    p = base_parser(__doc__, lr=0.01)
    p.add_argument("--loader-workers", type=int, default=0)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--arch", choices=["resnet18", "resnet50"], default="resnet18")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    return p.parse_args(argv)


def loader(size: int):
    mean, std = tf.constant(MEAN), tf.constant(STD)

    def load(path, label):
        data = tf.io.read_file(path)
        img = tf.io.decode_jpeg(data, channels=3)
        # The Inception crop: 8-100 % of the area, aspect ratio 3/4-4/3, then a flip.
        begin, extent, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(img),
            tf.zeros([1, 0, 4]),
            area_range=(0.08, 1.0),
            aspect_ratio_range=(3 / 4, 4 / 3),
            max_attempts=10,
            use_image_if_no_bounding_boxes=True,
        )
        img = tf.image.resize(tf.slice(img, begin, extent), [size, size])
        img = tf.image.random_flip_left_right(img)
        return (img / 255.0 - mean) / std, label

    return load


def epoch_dataset(paths, labels, epoch: int, args, rank: int, size: int) -> tf.data.Dataset:
    perm = np.random.default_rng([args.seed, epoch]).permutation(len(paths))
    ds = tf.data.Dataset.from_tensor_slices((paths[perm], labels[perm])).shard(size, rank)
    w = args.loader_workers
    ds = ds.map(
        loader(args.image_size), num_parallel_calls=w or None, deterministic=False if w else None
    )
    ds = ds.batch(args.batch_size)
    if w:
        return ds.prefetch(w)
    # W = 0 means the rank loads each batch when it asks for it: no prefetch or parallel map
    # that tf.data would otherwise add by itself.
    opts = tf.data.Options()
    opts.autotune.enabled = False
    opts.experimental_optimization.apply_default_optimizations = False
    opts.experimental_optimization.inject_prefetch = False
    opts.experimental_optimization.map_parallelization = False
    opts.experimental_optimization.map_and_batch_fusion = False  # a fused op buffers ahead
    return ds.with_options(opts)


def main(argv=None) -> int:
    args = parse_args(argv)
    hvd.init()
    tf.random.set_seed(args.seed)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    if args.device == "cpu":
        tf.config.set_visible_devices([], "GPU")
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
    rank, size = hvd.rank(), hvd.size()
    progress = Progress(args.progress, rank)
    notes = Annotations()
    paths, labels, classes = image_files(args.data)
    paths_a, labels_a = np.array(paths), np.array(labels, np.int64)

    shape = (args.image_size, args.image_size, 3)
    model = (
        resnet18(tf, shape, len(classes))
        if args.arch == "resnet18"
        else tf.keras.applications.ResNet50(weights=None, input_shape=shape, classes=len(classes))
    )
    loss_fn = tf.losses.SparseCategoricalCrossentropy(from_logits=False)
    opt = tf.optimizers.SGD(args.lr * size, momentum=0.9)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=opt)

    @tf.function
    def training_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    loss = tf.constant(0.0)
    first = True
    for epoch in range(args.epochs):
        t_epoch = time.time()
        with progress.phase(f"pipeline-start-{epoch}"):  # tf.data builds its pipeline here
            batches = iter(epoch_dataset(paths_a, labels_a, epoch, args, rank, size))
        step = 0
        while not args.steps_per_epoch or step < args.steps_per_epoch:
            t_wait = time.time()
            with notes.region("fetch", "next_batch", epoch, step):
                try:
                    images, y = next(batches)
                except StopIteration:
                    break
            t0 = time.time()
            with notes.region("compute", "train_step", epoch, step):
                loss = training_step(images, y)
                float(loss)  # waits for the step to finish
                if first:  # the optimizer's variables exist after the first step
                    hvd.broadcast_variables(model.variables, root_rank=0)
                    hvd.broadcast_variables(opt.variables(), root_rank=0)
                    first = False
            progress.add_step(
                epoch, step, t0, time.time(), wait=(t_wait, t0), samples=int(y.shape[0])
            )
            step += 1
        progress.steps.append({"epoch": epoch, "step": -1, "start": t_epoch, "end": time.time()})
        if rank == 0:
            print(f"epoch {epoch}: {step} steps, loss {float(loss):.4f}", flush=True)
            if args.checkpoint_dir:
                with progress.phase(f"checkpoint-{epoch}"):
                    checkpoint.write(os.path.join(args.checkpoint_dir, f"ckpt-{epoch}"))
    progress.metrics["loss"] = float(loss)
    notes.finalize()
    progress.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
