"""T6 for images: a DP-FedAvg public-vs-private discriminator finds what public images lack."""

import numpy as np

from conftest import provision_secret
from fedgen_debug.device.pixels import PixelInversionBug
from fedgen_debug.data import client_data as cd
from fedgen_debug.data import synthetic_images as si
from fedgen_debug.selectors.criteria import PublicDensity
from fedgen_debug.selectors.population import select_population
from fedgen_debug.selectors.public_discriminator import public_log_prob
from fedgen_debug.training.public_discriminator import train_public_discriminator
from fedgen_debug.training.config import ClientConfig, DPConfig, TrainingConfig


def test_discriminator_t6_selects_the_images_public_data_lacks(tmp_path):
    # Public: ordinary handwriting. Private: the same kind of writers, but a third of the devices run
    # the inverting app update, a style public data never shows.
    public = np.concatenate([si.generate_writer(99, w, si.SyntheticImagesConfig())[0] for w in range(6)])
    private_clean = si.generate(si.SyntheticImagesConfig(writers=12, seed=0, min_examples=50, max_examples=80))
    bug = PixelInversionBug(1 / 3, seed=1)
    private = bug.apply(private_clean)
    inverted = bug.affected_clients(private.client_ids)
    # 24 rounds: across 20 run secrets all 4 inverted devices were selected every time; at 12 rounds, 6 of
    # 40 secrets selected 2 or fewer (benchmark: the sweep in the privacy issue's note). A fixed secret
    # keeps a failure reproducible.
    run_dir = str(tmp_path / "disc")
    provision_secret(run_dir, "test_t6_images/disc")
    config = TrainingConfig(rounds=24, dp=DPConfig(clients_per_round=6, noise_multiplier=0.1, clip=1.0),
                            client=ClientConfig(epochs=1, batch_size=16, learning_rate=0.05), checkpoint_every=6)
    model = train_public_discriminator(private, public, config, run_dir, "synthetic-images:seed=0")

    def device_view(cid):
        pixels = cd.client_numpy(private, cid)["pixels"]
        return {"pixels": pixels}, {"public_log_prob": public_log_prob(model, pixels)}

    population = select_population(private.client_ids, device_view, PublicDensity(eps=0.2))
    selected_inverted = sum(1 for c in population.client_ids if c in inverted)
    # Every inverted device takes part, and it dominates what is kept.
    assert selected_inverted == len(inverted) == 4
    kept_from_inverted = sum(
        int(PublicDensity(0.2)(c, *device_view(c)).sum()) for c in population.client_ids if c in inverted)
    assert kept_from_inverted > 0.9 * population.examples_kept
    # Public-looking images score as public: clean devices keep few or none.
    for cid in sorted(set(private.client_ids) - inverted):
        mask = PublicDensity(0.2)(cid, *device_view(cid))
        assert mask is None or mask.mean() < 0.2
