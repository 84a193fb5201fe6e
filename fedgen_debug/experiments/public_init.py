"""Public pretraining of an auxiliary (`train-lm --init public:SPEC`, `train-gan --init public:SPEC`, issue
56; `training.config.check_public_init` checks the spec): before DP-FedAvg on the private users, the model
trains centrally on public stand-in data, and DP-FedAvg starts from those weights. An LM trains on public
text with the run's own vocabulary and tokenization; a GAN's G and D train as a WGAN-GP on every public
image (clean: no bug, no fault, no selection).

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
from fedgen_debug.data.spec import PUBLIC_PREFIX

EPOCHS = 2            # over every public sentence (or OOV word, for a char-LM)
BATCH_SIZE = 32
LEARNING_RATE = 1e-3  # Adam: the pretraining is central, not federated
GAN_STEPS = 400           # central WGAN-GP steps, one D and one G step each
GAN_LEARNING_RATE = 1e-4  # Adam(β₁ = 0.5) for D and G (Gulrajani et al. 2017)


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


def pretrained_gan_weights(init: str, model_config, seed: int) -> dict:
    """G and D of `model_config` trained centrally as a WGAN-GP on every image of the public `init`
    (`GAN_STEPS` steps of `BATCH_SIZE`, batches and noise from the public `seed`): {"generator":
    `tff.learning.models.ModelWeights`, "discriminator": [arrays]} for `GANProcess.set_model_weights`."""
    import tensorflow_federated as tff

    from fedgen_debug.data import client_data as cd
    from fedgen_debug.device.gan_data import to_gan_range
    from fedgen_debug.models.gan import build_discriminator, build_generator
    from fedgen_debug.progress import progress
    from fedgen_debug.training.dp_fedavg_gan import wgan_gp_losses

    public = data_spec.load_client_data(init[len(PUBLIC_PREFIX):])
    images = to_gan_range(np.concatenate([cd.client_numpy(public, cid)["pixels"] for cid in public.client_ids]))
    gen, disc = build_generator(model_config, seed), build_discriminator(model_config, seed)
    gen_opt, disc_opt = (tf.keras.optimizers.Adam(GAN_LEARNING_RATE, beta_1=0.5) for _ in range(2))

    @tf.function
    def step(real, noise, alpha, gen_noise):
        with tf.GradientTape() as tape:
            disc_loss = wgan_gp_losses(disc, real, gen(noise, training=True), alpha).disc_loss
        disc_opt.apply_gradients(zip(tape.gradient(disc_loss, disc.trainable_variables), disc.trainable_variables))
        with tf.GradientTape() as tape:
            gen_loss = -tf.reduce_mean(disc(gen(gen_noise, training=True), training=True))
        gen_opt.apply_gradients(zip(tape.gradient(gen_loss, gen.trainable_variables), gen.trainable_variables))

    rng = np.random.default_rng(seed)
    noise_dim = gen.input_shape[-1]
    for _ in progress(range(GAN_STEPS), desc="public pretraining (GAN)"):
        real = images[rng.integers(0, len(images), BATCH_SIZE)]
        noise, gen_noise = (rng.standard_normal((BATCH_SIZE, noise_dim)).astype(np.float32) for _ in range(2))
        step(real, noise, rng.random(BATCH_SIZE).astype(np.float32), gen_noise)
    return {"generator": tff.learning.models.ModelWeights([v.numpy() for v in gen.trainable_variables],
                                                          [v.numpy() for v in gen.non_trainable_variables]),
            "discriminator": [v.numpy() for v in disc.trainable_variables]}
