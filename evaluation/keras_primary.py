"""A modeler's own primary model, built outside the tool: a 2-conv Keras CNN trained centrally on an images
`.npz` (pixels, labels, writer_index or client_ids), saved as a `.keras` file for `train-gan --primary`.

  .venv/bin/python evaluation/keras_primary.py ../shared/data/femnist_real_184_writers.npz --out femnist_cnn.keras

It takes the file's pixels as they are scaled to [0, 1] (white paper for FEMNIST) and returns logits, so
`--primary-background white --primary-output auto` read it. A fifth of the writers (drawn with `--seed`) is
held out and the accuracy on them printed: T4 needs a model that tells users apart (docs/gan.md). Used by
docs/analysis.md (2026-12-07, later) for T4 pairs chosen by a model the tool did not build.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402


def writers_of(data) -> np.ndarray:
    """Each image's writer index (from `writer_index`, else from `client_ids`)."""
    if "writer_index" in data.files:
        return np.asarray(data["writer_index"])
    return np.unique(np.asarray(data["client_ids"]), return_inverse=True)[1]


def held_out(writers: np.ndarray, seed: int, share: float = 0.2) -> np.ndarray:
    """A boolean mask of the images of `share` of the writers, drawn with `seed`."""
    ids = np.unique(writers)
    chosen = np.random.default_rng(seed).permutation(ids)[: max(1, int(len(ids) * share))]
    return np.isin(writers, chosen)


def build(classes: int):
    import tensorflow as tf

    return tf.keras.Sequential([
        tf.keras.Input((28, 28)), tf.keras.layers.Reshape((28, 28, 1)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"), tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(64, 3, activation="relu"), tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(), tf.keras.layers.Dense(128, activation="relu"), tf.keras.layers.Dense(classes)])


def main() -> None:
    import tensorflow as tf

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="an images .npz (pixels, labels, writer_index or client_ids)")
    parser.add_argument("--out", required=True, help="the .keras file to write")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--classes", type=int, default=62)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = np.load(args.data)
    pixels = np.asarray(data["pixels"], np.float32)
    pixels = pixels / 255.0 if pixels.max() > 1.0 else pixels
    labels = np.asarray(data["labels"], np.int64)
    test = held_out(writers_of(data), args.seed)
    tf.keras.utils.set_random_seed(args.seed)
    model = build(args.classes)
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    model.fit(pixels[~test], labels[~test], epochs=args.epochs, batch_size=64, verbose=2)
    accuracy = model.evaluate(pixels[test], labels[test], verbose=0)[1] if test.any() else float("nan")
    model.save(args.out)
    print(f"held-out writers' accuracy {accuracy:.3f} ({int(test.sum())} images) -> {args.out}")


if __name__ == "__main__":
    main()
