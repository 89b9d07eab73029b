"""Horovod + TensorFlow 2 MNIST, as Horovod's examples/tensorflow2/tensorflow2_mnist.py does it.

Every rank loads *its own copy* of the dataset, ``mnist-<rank>.npz`` (file-per-process, as
``tf.keras.datasets.mnist.load_data(path='mnist-%d.npz' % hvd.rank())`` does in the example),
trains with a DistributedGradientTape, rank 0 writes a TF checkpoint every epoch, and every
rank evaluates its shard of the test set.
"""

from __future__ import annotations

import os
import sys
import time

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from iosweep.run.training import base_parser
from iosweep.run.training.progress import Progress


def parse_args(argv=None):
    p = base_parser(__doc__, lr=0.001)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    hvd.init()
    tf.random.set_seed(args.seed)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    rank, size = hvd.rank(), hvd.size()
    progress = Progress(args.progress, rank)

    npz = os.path.join(args.data, f"mnist-{rank}.npz")
    with progress.phase("load-train"), np.load(npz, allow_pickle=True) as f:
        x_train, y_train = f["x_train"], f["y_train"]
        x_test, y_test = f["x_test"], f["y_test"]
    dataset = (
        tf.data.Dataset.from_tensor_slices(
            (tf.cast(x_train[..., tf.newaxis] / 255.0, tf.float32), tf.cast(y_train, tf.int64))
        )
        .repeat()
        .shuffle(10000, seed=args.seed + rank)
        .batch(args.batch_size)
    )
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Conv2D(32, [3, 3], activation="relu"),
            tf.keras.layers.Conv2D(64, [3, 3], activation="relu"),
            tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
            tf.keras.layers.Dropout(0.25),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dropout(0.5),
            tf.keras.layers.Dense(10, activation="softmax"),
        ]
    )
    loss_fn = tf.losses.SparseCategoricalCrossentropy()
    # Horovod scales the learning rate by the number of workers.
    opt = tf.optimizers.Adam(args.lr * size)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=opt)

    @tf.function
    def training_step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        # Broadcast after the first step, once the variables exist.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables(), root_rank=0)
        return loss

    batches = iter(dataset)
    loss = tf.constant(0.0)
    # 0: the whole epoch (every sample once across the ranks)
    steps = args.steps_per_epoch or -(-len(x_train) // (args.batch_size * size))
    for epoch in range(args.epochs):
        t_epoch = time.time()
        for step in range(steps):
            t_wait = time.time()
            images, labels = next(batches)
            t0 = time.time()
            loss = training_step(images, labels, epoch == 0 and step == 0)
            float(loss)  # waits for the step to finish
            progress.add_step(
                epoch, step, t0, time.time(), wait=(t_wait, t0), samples=int(labels.shape[0])
            )
        progress.steps.append({"epoch": epoch, "step": -1, "start": t_epoch, "end": time.time()})
        if rank == 0:
            print(f"epoch {epoch}: loss {float(loss):.4f}", flush=True)
            if args.checkpoint_dir:
                with progress.phase(f"checkpoint-{epoch}"):
                    checkpoint.save(os.path.join(args.checkpoint_dir, "ckpt"))

    with progress.phase("eval"):
        xs = tf.cast(x_test[rank::size][..., tf.newaxis] / 255.0, tf.float32)
        pred = tf.argmax(model(xs, training=False), axis=1)
        correct = tf.reduce_mean(tf.cast(pred == tf.cast(y_test[rank::size], tf.int64), tf.float32))
        accuracy = float(hvd.allreduce(correct, name="accuracy"))
    progress.metrics = {"accuracy": accuracy, "loss": float(loss)}
    if rank == 0:
        print(f"test accuracy {accuracy:.4f}", flush=True)
    progress.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
