"""Horovod + Keras (TF 2) Model.fit over a tf.data pipeline of PNG files.

PER_SAMPLE_MS and STEP_MS (environment) set the CPU cost of preparing a sample (in the
tf.data map) and of a training step (in the model), in milliseconds.
"""

import glob
import os
import sys
import time

import horovod.tensorflow.keras as hvd
import tensorflow as tf

PER_SAMPLE_MS = float(os.environ.get("PER_SAMPLE_MS", "0"))
STEP_MS = float(os.environ.get("STEP_MS", "0"))


def spin(ms):
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass
    return 0.0


class Busy(tf.keras.layers.Layer):
    """Costs STEP_MS of CPU per training step (the rest of a model)."""

    def call(self, x):
        t = tf.numpy_function(lambda: spin(STEP_MS), [], tf.float64)
        t.set_shape(())
        return x + tf.cast(t, x.dtype)


def load(path):
    img = tf.io.decode_png(tf.io.read_file(path), channels=3)
    img = tf.image.convert_image_dtype(img, tf.float32)
    label = tf.strings.to_number(tf.strings.substr(tf.strings.split(path, "/")[-1], 0, 1), tf.int32)
    t = tf.numpy_function(lambda: spin(PER_SAMPLE_MS), [], tf.float64)
    t.set_shape(())
    return tf.ensure_shape(img + tf.cast(t, tf.float32), (20, 20, 3)), label


def main(folder, parallel, epochs):
    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    files = sorted(glob.glob(os.path.join(folder, "*.png")))[hvd.rank() :: hvd.size()]
    ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files), seed=1)
    ds = ds.map(load, num_parallel_calls=parallel or None).batch(8)
    if parallel:
        ds = ds.prefetch(parallel)
    else:
        opts = tf.data.Options()
        opts.autotune.enabled = False
        opts.experimental_optimization.inject_prefetch = False
        ds = ds.with_options(opts)
    model = tf.keras.Sequential(
        [tf.keras.Input((20, 20, 3)), tf.keras.layers.Flatten(), Busy(), tf.keras.layers.Dense(3)]
    )
    opt = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01))
    model.compile(opt, tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(
        ds,
        epochs=epochs,
        verbose=2 if hvd.rank() == 0 else 0,
        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
