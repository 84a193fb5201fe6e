"""Every PUBLIC randomness stream, by name: the numbers that keep one use of `--seed` apart from another.

Public randomness (synthetic data, model init, simulated bug and canary assignment, the modeler's
samples) comes from the run's public `seed`; each use mixes in its own stream number here, as
`client_rng(seed, client_id, STREAM)`, `np.random.default_rng([seed, STREAM])` or
`SeedSequence(seed, spawn_key=(STREAM,))`. Two uses sharing a number would draw the same values, so a
bug's devices would be a canary's devices; a test (tests/test_rng_streams.py) checks the numbers are
distinct and that no module keeps a number of its own.

Adding a stream: a new number, never reuse or renumber one: a number is part of every published
result's reproduction (renumbering changes which devices carry a bug, and every verdict and z with it).

The SECRET streams (DP noise, client sampling, canary insertion, ...) are not here: they derive from
the per-run secret kept in `server/`, by name, in `fedgen_debug.runs.secret.STREAMS`.
"""

from __future__ import annotations

# ---- simulated bugs (device/) ------------------------------------------------------------------------
PIXEL_INVERSION = 0x1A7          # which devices run the inverted-pixel update (`device.pixels`)
TOKENIZATION = 0x70C             # which of a device's sentences the buggy tokenizer glues (`device.tokenization`)
ROLLOUT = 0x2011                 # each device's draw against a staged rollout's fractions (`device.rollout`)
FAULT_CONTENT = 0xFA17           # a catalog fault's own draws on a hit device (noise, typos), after the stream
                                 # its name gives (`device.faults.fault_stream`: which devices it hits)

# ---- canaries (device/, memorization/) ---------------------------------------------------------------
CANARY_TEXTS = 0xCA4A            # the text canaries' random prefixes and suffixes (`device.canary_specs`)
LM_CANARY_DEVICES = 0xCA4B       # the ramaswamy design's synthetic canary devices, LM (`device.lm_canaries`)
GAN_CANARY_DEVICES = 0xCA4C      # the same for image canaries (`device.gan_canaries`)
IMAGE_CANARIES = 0x6C1F          # the glyphs image canaries draw (`device.image_canaries`)
GLYPH_REFERENCES = 0x6C20        # the reference glyphs a GAN canary is ranked among (`memorization.gan_check`)
CANARY_REFERENCES = 0xE4         # the random suffixes an LM canary is ranked among, per canary id
                                 # (`memorization.check`)
UPDATE_CANARY_DIRECTIONS = 7_919  # multiplies the seed of the update canaries' random directions
                                  # (`training.update_canaries`): a TF stateless seed, not a numpy stream

# ---- training and data -------------------------------------------------------------------------------
GAN_SNAPSHOT_NOISE = 0x5A4       # the fixed generator inputs of a GAN run's snapshots (`training.gan_snapshots`)
GAN_CLIENT_SHUFFLE = 0x6A5       # a GAN client's image order in each round (`experiments.gan`)
PRIMARY_CNN_SPLIT = 0xC11        # the primary CNN's held-out writers (`training.primary_cnn`)
PRIMARY_CNN_BATCHES = 0xC12      # the primary CNN's batch order (`training.primary_cnn`)
SYNTHETIC_LEXICON = 0x1E         # the synthetic text's pseudo-words (`data.synthetic_text`)
FLEET_MEMBERSHIP = 0xF1E         # which periods a device is in the fleet (`data.fleet`)
FLEET_ORDER = 0xF1F              # the order a device's examples arrive in over periods (`data.fleet`)

# ---- on-device selectors (selectors/) ----------------------------------------------------------------
RANDOM_SELECTION = 0x71          # the `random` selector's draw per example (`selectors.criteria`)
PUBLIC_DISCRIMINATOR = 0xD15C    # the public images a device's discriminator trains against
                                 # (`selectors.public_discriminator`)

# Every stream above, by name (the test checks they are distinct).
PUBLIC_STREAMS: dict[str, int] = {name: value for name, value in dict(globals()).items()
                                  if name.isupper() and isinstance(value, int)}

# ---- seed offsets: public data generated from `seed + OFFSET` ----------------------------------------
# Not streams: the offset gives a second synthetic data set its own seed, apart from the private data's.
PUBLIC_STAND_IN_SEED_OFFSET = 1000   # public stand-in data: the GAN's public primary CNN (`experiments.gan`)
                                     # and T6's public text (`experiments.t6_topic`)
CANARY_FILLER_SEED_OFFSET = 2000     # public images filling the ramaswamy image canary devices
                                     # (`device.gan_canaries`)
GLYPH_SAMPLES_SEED_OFFSET = 0xC4     # the samples a GAN canary check draws (`memorization.gan_check`)
AFTER_RUN_SEED_OFFSET = 1            # the demo's LM after-run: an independent replicate of the before-run
                                     # (its own model init and bug draw; `cli.demo_lm`)

SEED_OFFSETS: dict[str, int] = {
    "PUBLIC_STAND_IN_SEED_OFFSET": PUBLIC_STAND_IN_SEED_OFFSET,
    "CANARY_FILLER_SEED_OFFSET": CANARY_FILLER_SEED_OFFSET,
    "GLYPH_SAMPLES_SEED_OFFSET": GLYPH_SAMPLES_SEED_OFFSET,
    "AFTER_RUN_SEED_OFFSET": AFTER_RUN_SEED_OFFSET,
}
