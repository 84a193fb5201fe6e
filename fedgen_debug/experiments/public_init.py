"""Public pretraining of an LM auxiliary (`train-lm --init public:SPEC`, issue 56; `training.lm_run.check_init`
checks the spec): before DP-FedAvg on the private users, the model trains centrally on public stand-in
text, with the run's own vocabulary and tokenization, and DP-FedAvg starts from those weights.

Why it costs no ε: the stand-in users are public (another seed of the generator, a public corpus), and
the vocabulary the pretraining encodes with is itself a DP release of the run (or public). Nothing of
the private users enters the pretrained weights, so DP-FedAvg's guarantee is the run's as before; the
run's released config names the init, so a modeler reading samples knows where the model started.

What it may do to a diagnosis: a model that starts from clean text has to be pulled away from it by the
private updates; at a small share of buggy devices and large noise the pull may not be enough. The
power curve measures both sides (docs/privacy.md).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from fedgen_debug.data import spec as data_spec
from fedgen_debug.device.lm_data import PUBLIC_PREFIX

EPOCHS = 2            # over every public sentence (or OOV word, for a char-LM)
BATCH_SIZE = 32
LEARNING_RATE = 1e-3  # Adam: the pretraining is central, not federated


def pretraining_examples(run, vocab) -> tuple[np.ndarray, np.ndarray]:
    """The public text as the run's devices would encode it (no app bug, no fault: public text is clean):
    (x, y) int32 [n, max_length]."""
    from fedgen_debug.experiments.lm import prepare_devices

    public = data_spec.load_client_data(run.init[len(PUBLIC_PREFIX):])
    clean = dataclasses.replace(run, bug_fraction=0.0, fault=None, init=None)   # how a device encodes
    devices = prepare_devices(clean, public, vocab)
    pairs = [pair for pair in devices.examples.values() if len(pair[0])]
    if not pairs:
        raise ValueError(f"init: {run.init} holds no text for a {run.kind}-LM to train on.")
    return (np.concatenate([x for x, _ in pairs]).astype(np.int32),
            np.concatenate([y for _, y in pairs]).astype(np.int32))


def pretrained_weights(run, spec, vocab, seed: int):
    """The model of `spec` trained `EPOCHS` on the public examples (shuffled with the public `seed`), as
    `tff.learning.models.ModelWeights` for `process.set_model_weights`."""
    import tensorflow_federated as tff

    x, y = pretraining_examples(run, vocab)
    tf.keras.utils.set_random_seed(seed)
    model = spec.keras_model_fn()
    model.compile(optimizer=tf.keras.optimizers.Adam(LEARNING_RATE), loss=spec.loss_fn())
    model.fit(x, y, batch_size=BATCH_SIZE, epochs=EPOCHS, shuffle=True, verbose=0)
    return tff.learning.models.ModelWeights([v.numpy() for v in model.trainable_variables],
                                            [v.numpy() for v in model.non_trainable_variables])
