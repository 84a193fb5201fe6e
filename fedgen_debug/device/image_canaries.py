"""Canaries for the GAN auxiliaries: rare synthetic glyphs, and what a generator reveals of them.

A glyph is a 7×7 grid of random bits drawn 4× larger on the 28×28 canvas (dark ink on the white
background of the canonical format): a pixel pattern no handwriting resembles, so a generator that
draws it learned it from the canary. |R| = 2⁴⁹ possible glyphs. The same insertion designs and specs
as the LM canaries (`device.canary_specs.parse_canaries`: Thakkar p_u/p_e on the users' images,
Ramaswamy n_u devices with n_e copies and 200 − n_e public images), applied on the devices after the
app's preprocessing (`device.gan_canaries`).

Exposure from the generator's samples (the "distance to closest record" synthetic-data users ask for):
each glyph's nearest-sample distance, ranked among the same distance of `references` random glyphs
that were never inserted. `rs_rank` is that rank (1 + references at least as close; the GAN analogue
of the LM's random-sampling rank), `exposure` = log2(m + 1) − log2 rank, and `bs_found` says a sample
*decodes* to the canary — its nearest glyph among the canary and all references is the canary (the
analogue of extraction by beam search).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fedgen_debug import rng_streams
from fedgen_debug.device.canary_specs import InsertionConfig

GRID, CELL = 7, 4
GLYPH_BITS = GRID * GRID
INK_SHARE = 0.35   # share of dark cells: a visible pattern, far from both blank and black


def glyph_pixels(bits) -> np.ndarray:
    """A glyph's 28×28 pixels in [0, 1] (1 = white background, 0 = ink)."""
    grid = 1.0 - np.asarray(bits, np.float32).reshape(GRID, GRID)
    return np.kron(grid, np.ones((CELL, CELL), np.float32))


def random_bits(rng: np.random.Generator, count: int) -> np.ndarray:
    return (rng.random((count, GLYPH_BITS)) < INK_SHARE).astype(np.uint8)


@dataclasses.dataclass(frozen=True)
class ImageCanary:
    """One glyph, the label its device files it under, and its insertion (None: a control)."""

    canary_id: str
    bits: tuple[int, ...]
    label: int
    config: InsertionConfig | None

    @property
    def pixels(self) -> np.ndarray:
        return glyph_pixels(self.bits)

    def to_json(self) -> dict:
        return {"id": self.canary_id, "kind": "glyph", "bits": "".join(map(str, self.bits)), "label": self.label,
                "config": None if self.config is None else self.config.to_json()}

    @classmethod
    def from_json(cls, data: dict) -> "ImageCanary":
        config = None if data["config"] is None else InsertionConfig(**data["config"])
        return cls(data["id"], tuple(int(b) for b in data["bits"]), data["label"], config)


def generate_image_canaries(configs, seed: int, classes: int, controls: int = 10) -> tuple[ImageCanary, ...]:
    """`count` glyphs per config and `controls` never inserted, all distinct, from the public `seed`."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(rng_streams.IMAGE_CANARIES,)))
    slots = [(c, i) for c in configs for i in range(c.count)] + [(None, i) for i in range(controls)]
    seen, canaries = set(), []
    for config, index in slots:
        while True:
            bits = tuple(int(b) for b in random_bits(rng, 1)[0])
            if bits not in seen:
                break
        seen.add(bits)
        name = f"{config.design}:{config.label}#{index}" if config else f"control#{index}"
        canaries.append(ImageCanary(name, bits, int(rng.integers(classes)), config))
    return tuple(canaries)


def nearest_distances(samples: np.ndarray, glyphs: np.ndarray, chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """For each glyph (rows of `glyphs`, flattened in [-1, 1]): the L2 distance to its nearest sample
    and that sample's index. Blocked so memory stays at chunk × glyphs."""
    samples = samples.reshape(len(samples), -1).astype(np.float32)
    glyphs = glyphs.reshape(len(glyphs), -1).astype(np.float32)
    g2 = (glyphs ** 2).sum(1)
    best = np.full(len(glyphs), np.inf, np.float32)
    where = np.zeros(len(glyphs), np.int64)
    for start in range(0, len(samples), chunk):
        block = samples[start:start + chunk]
        d2 = (block ** 2).sum(1)[:, None] + g2[None, :] - 2.0 * block @ glyphs.T
        idx = d2.argmin(0)
        val = d2[idx, np.arange(len(glyphs))]
        better = val < best
        best[better], where[better] = val[better], idx[better] + start
    return np.sqrt(np.maximum(best, 0.0)), where


def decodes_to(sample: np.ndarray, canary: np.ndarray, references: np.ndarray) -> bool:
    """The sample's nearest glyph among the canary and every reference is the canary."""
    to_canary = np.linalg.norm(sample.ravel() - canary.ravel())
    to_references = np.linalg.norm(references.reshape(len(references), -1) - sample.ravel()[None, :], axis=1)
    return bool(to_canary < to_references.min())
