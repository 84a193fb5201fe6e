"""Glyph canaries for the GAN auxiliaries: generation, insertion on the devices (rates), the
nearest-sample rank on hand-built samples (exact), and a GAN run that records them."""

import math

import numpy as np
import pytest

from fedgen_debug.data import client_data as cd
from fedgen_debug.device import canaries as device_canaries
from fedgen_debug.device.canary_specs import parse_canaries
from fedgen_debug.memorization.gan_check import GanCheckConfig, check_glyphs, to_gan_range
from fedgen_debug.device.image_canaries import GLYPH_BITS, ImageCanary, generate_image_canaries, nearest_distances
from fedgen_debug.runs.secret import RunSecret
from fedgen_debug.device import gan_canaries


def test_glyphs_are_seeded_distinct_blocky_and_in_the_canonical_format():
    configs = parse_canaries("ramaswamy:n_u=2,n_e=200,count=3+thakkar:p_u=0.1,p_e=0.5,count=2")
    canaries = generate_image_canaries(configs, seed=4, classes=10)
    assert len(canaries) == 3 + 2 + 10 and sum(c.config is None for c in canaries) == 10
    assert len({c.bits for c in canaries}) == len(canaries)
    assert generate_image_canaries(configs, seed=4, classes=10) == canaries
    assert generate_image_canaries(configs, seed=5, classes=10) != canaries
    pixels = canaries[0].pixels
    assert pixels.shape == (28, 28) and set(np.unique(pixels)) <= {0.0, 1.0}
    # 4x4 blocks of one bit each; 1 = white background, ink where the bit is set.
    np.testing.assert_array_equal(pixels[::4, ::4], 1.0 - np.array(canaries[0].bits).reshape(7, 7))
    assert all(0 <= c.label < 10 for c in canaries)
    assert ImageCanary.from_json(canaries[0].to_json()) == canaries[0]
    assert len(canaries[0].bits) == GLYPH_BITS


def _devices(n_clients=400, n=20):
    rng = np.random.default_rng(0)
    return cd.ArrayClientData({f"u{i:03d}": cd.image_examples(rng.random((n, 28, 28)).astype(np.float32),
                                                              rng.integers(10, size=n)) for i in range(n_clients)})


def test_thakkar_insertion_rates_and_ramaswamy_devices():
    configs = parse_canaries("thakkar:p_u=0.2,p_e=0.5,count=1+ramaswamy:n_u=3,n_e=14,count=1")
    canaries = generate_image_canaries(configs, seed=1, classes=10)
    thakkar, ramaswamy = canaries[0], canaries[1]
    data = gan_canaries.with_canaries(_devices(), canaries, RunSecret.fresh(), seed=1)
    glyph = thakkar.pixels
    sharers, replaced, total = 0, 0, 0
    for cid in [c for c in data.client_ids if c.startswith("u")]:
        pixels = cd.client_numpy(data, cid)["pixels"]
        hits = np.array([np.array_equal(p, glyph) for p in pixels])
        sharers += hits.any()
        if hits.any():
            replaced += hits.sum()
            total += len(hits)
    # p_u = 0.2 of 400 users (sd 8); p_e = 0.5 of a sharer's images (a sharer has ≥ 1 by construction).
    assert abs(sharers - 80) < 4 * 8
    assert abs(replaced / total - 0.5) < 0.06
    # n_u = 3 synthetic devices, each with n_e = 14 copies among 200 images, filed under the canary's label.
    synthetic = [c for c in data.client_ids if c.startswith("canary-device-")]
    assert synthetic == list(device_canaries.synthetic_device_ids("thakkar:p_u=0.2,p_e=0.5,count=1+"
                                                               "ramaswamy:n_u=3,n_e=14,count=1"))
    assert len(synthetic) == 3
    for did in synthetic:
        arrays = cd.client_numpy(data, did)
        copies = np.array([np.array_equal(p, ramaswamy.pixels) for p in arrays["pixels"]])
        assert len(copies) == 200 and copies.sum() == 14
        assert set(arrays["label"][copies]) == {ramaswamy.label}


def test_nearest_distances_match_brute_force():
    rng = np.random.default_rng(3)
    samples, glyphs = rng.normal(size=(50, 28, 28, 1)), rng.normal(size=(7, 28, 28))
    distance, index = nearest_distances(samples, glyphs, chunk=16)
    brute = np.linalg.norm(samples.reshape(50, 1, -1) - glyphs.reshape(1, 7, -1), axis=2)
    np.testing.assert_allclose(distance, brute.min(0), rtol=1e-4)
    np.testing.assert_array_equal(index, brute.argmin(0))


def test_a_generator_that_draws_the_canary_ranks_it_first_and_one_that_does_not_does_not():
    configs = parse_canaries("ramaswamy:n_u=1,n_e=200,count=1")
    canaries = generate_image_canaries(configs, seed=2, classes=10)
    inserted = canaries[0]  # canaries[1] is the never-inserted control
    rng = np.random.default_rng(0)
    noise = np.clip(rng.normal(0.0, 0.6, size=(300, 28, 28, 1)), -1, 1).astype(np.float32)
    config = GanCheckConfig(samples=301, references=500)
    # One sample is the canary, slightly blurred by noise: rank 1, decodes, maximal exposure.
    drawn = to_gan_range(inserted.pixels)[..., None] + rng.normal(0, 0.05, (28, 28, 1)).astype(np.float32)
    rows = check_glyphs(np.concatenate([noise, drawn[None]]), canaries, config)
    assert rows[0]["rs_rank"] == 1 and rows[0]["bs_found"]
    assert rows[0]["exposure"] == pytest.approx(math.log2(501))
    assert rows[0]["nearest_sample"] == 300
    # The control was never drawn: a rank in the references' range, not decoded.
    assert rows[1]["rs_rank"] > 10 and not rows[1]["bs_found"]
    # Without the drawn sample the inserted glyph is as unexposed as any.
    rows = check_glyphs(noise, canaries, config)
    assert rows[0]["rs_rank"] > 10 and not rows[0]["bs_found"]


def test_a_gan_run_with_canaries_releases_the_glyphs_and_its_check(tmp_path):
    """End to end at test size (the GAN is far from drawing anything; the structure and the release
    boundary are what is checked): canaries.json, N counting the synthetic devices, the report."""
    import json
    import os

    from conftest import provision_secret, run_cli
    from fedgen_debug.memorization.exposure import exposure_from_rank
    from fedgen_debug.runs import store
    from release_boundary import check_released

    run_dir = str(tmp_path / "gan")
    provision_secret(run_dir, "test_gan_canaries/gan")
    spec = "ramaswamy:n_u=2,n_e=200,count=1+thakkar:p_u=0.5,p_e=0.5,count=1"
    result = run_cli("train-gan", "--data", "synthetic-images:writers=6,seed=3", "--select", "random", "--preset",
                     "test", "--primary-classes", "10", "--canaries", spec, "--out", run_dir, timeout=900)
    assert result.returncode == 0, result.stderr
    recorded = store.read_json(store.released(run_dir, store.CANARIES))
    assert recorded["kind"] == "glyph" and recorded["space_size"] == 2.0 ** 49 and len(recorded["canaries"]) == 12
    releases = store.read_json(store.released(run_dir, store.PRIVACY))["releases"]
    (training,) = [r for k, r in releases.items() if k.endswith("/training")]
    assert training["population_size"] == 6 + 2  # the synthetic devices count in N
    check = run_cli("check-memorization", run_dir, "--samples", "500", "--references", "300", "--json", timeout=600)
    report = json.loads(check.stdout)
    assert check.returncode == (0 if report["verdict"]["passed"] else 1), check.stderr
    assert report["kind"] == "GAN" and len(report["canaries"]) == 12
    assert [t["n_u"] for t in report["ramaswamy"]] == [2] and [t["p_u"] for t in report["thakkar"]] == [0.5]
    for row in report["canaries"]:
        assert {"exposure", "rs_rank", "bs_found", "config", "nearest_sample_distance"} <= set(row)
        # the exposure is the one its rank among the 300 references implies, and the verdict counts it
        assert row["exposure"] == pytest.approx(float(exposure_from_rank(row["rs_rank"], 300)[0]))
    over = [r["id"] for r in report["canaries"] if r["inserted"] and r["exposure"] > report["verdict"]["max_exposure_bits"]]
    assert report["verdict"]["over_threshold"] == over and report["verdict"]["passed"] is (not over)
    assert os.path.exists(store.released(run_dir, store.MEMORIZATION_GLYPHS_PNG))
    from fedgen_debug.data import spec as data_spec

    check_released(run_dir, client_ids=data_spec.load_client_data("synthetic-images:writers=6,seed=3").client_ids)
    text = run_cli("check-memorization", run_dir, "--samples", "500", "--references", "300", timeout=600).stdout
    assert "inserted glyph canaries" in text and "Ramaswamy et al. (Table 4)" in text
