"""Canaries in the GAN scenario (`train-gan --canaries SPEC`): glyphs inserted on the devices after the
app's preprocessing and before selection (a canary reaches the GAN only if its device selects it,
as any image), their record in the run store, and Ramaswamy's synthetic devices filled with public
stand-in handwriting. The checker (`memorization.gan_check`) reads them back.
"""

from __future__ import annotations

import numpy as np

from fedgen_debug import rng_streams
from fedgen_debug.data import client_data as cd
from fedgen_debug.data import spec as data_spec
from fedgen_debug.device import canaries as device_canaries
from fedgen_debug.device.canary_specs import parse_canaries
from fedgen_debug.device.image_canaries import GLYPH_BITS, ImageCanary, generate_image_canaries
from fedgen_debug.progress import progress
from fedgen_debug.runs import store

PUBLIC_FILLER = "synthetic-images:writers=20,seed={seed}"


def canaries_for_run(spec: str, seed: int, classes: int, out_dir: str) -> tuple[ImageCanary, ...]:
    """The run's glyphs: generated from the public `seed` once and released; read back on resume."""
    path = store.released(out_dir, store.CANARIES)
    try:
        return tuple(ImageCanary.from_json(c) for c in store.read_json(path)["canaries"])
    except FileNotFoundError:
        pass
    canaries = generate_image_canaries(parse_canaries(spec), seed, classes)
    store.write_json(path, {"spec": spec, "kind": "glyph", "alphabet_size": 2, "space_size": 2.0 ** GLYPH_BITS,
                            "canaries": [c.to_json() for c in canaries]})
    return canaries


def _example(canary: ImageCanary):
    return canary.pixels, canary.label


def _arrays(examples) -> dict:
    """(pixels, label) pairs → one device's examples in the canonical image format."""
    return cd.image_examples(np.stack([p for p, _ in examples]), np.array([label for _, label in examples]))


def with_canaries(app_data, canaries, secret, seed: int):
    """The devices' data after insertion, synthetic devices included (device-side state)."""
    insertion = device_canaries.ThakkarInsertion(canaries, secret)
    arrays = {}
    for cid in progress(sorted(app_data.client_ids), desc="inserting canaries", unit="client"):
        own = cd.client_numpy(app_data, cid)
        examples = insertion.device_examples(cid, list(zip(own["pixels"], own["label"])), payload=_example)
        arrays[cid] = _arrays(examples)
    if device_canaries.ramaswamy_canaries(canaries):
        public = data_spec.load_client_data(PUBLIC_FILLER.format(seed=seed + rng_streams.CANARY_FILLER_SEED_OFFSET))
        filler = []
        for pid in sorted(public.client_ids):
            own = cd.client_numpy(public, pid)
            filler.extend(zip(own["pixels"], own["label"]))
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(rng_streams.GAN_CANARY_DEVICES,)))
        for did, examples in device_canaries.ramaswamy_devices(canaries, filler, rng, payload=_example).items():
            arrays[did] = _arrays(examples)
    return cd.ArrayClientData(arrays)
