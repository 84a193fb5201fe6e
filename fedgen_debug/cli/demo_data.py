"""The demo's data stage: the synthetic federated datasets, both bugs as on-device preprocessing, and
what a modeler may see of them without looking at an example: DP counts and DP aggregates.

The aggregates are releases like any other: each population's are charged to the ledger at once, into
a run directory of their own (`device-aggregates/text`, `device-aggregates/images`), whose secret makes
a re-run of the demo find them again instead of charging twice.
- text: the users' mean OOV rate (paper Table 6, as the mean over users of each user's OOV share, with
  the production vocabulary from public text) without the bug, with it, and after the fix;
- images: the users' mean pixel intensity, likewise;
- both: DP counts of examples and of client sizes (`data_cmd.dp_size_summary`).
"""

from __future__ import annotations

import os

import numpy as np

from fedgen_debug.progress import progress

VARIANTS = ("without_bug", "with_bug", "after_fix")
AGGREGATE_NOISE = 4.0   # each mean: σ/Δ = 2, error ± 2/N


def _specs(kind: str):
    from fedgen_debug.cli.data_cmd import EXAMPLES_CAP, SIZE_BINS
    from fedgen_debug.privacy import aggregates

    statistic = "oov_rate" if kind == "text" else "mean_pixel_intensity"
    return ([aggregates.BoundedSum(f"{kind}: {statistic} {v}", (1.0,), AGGREGATE_NOISE) for v in VARIANTS]
            + [aggregates.BoundedSum(f"{kind}: examples", (float(EXAMPLES_CAP),), 4.0),
               aggregates.Histogram(f"{kind}: client sizes", SIZE_BINS, 2.0)])


def stage_records(kind: str, population: str, size: int, secret, run_dir: str) -> list:
    from fedgen_debug.privacy.aggregates import aggregate_record

    return [aggregate_record(spec, population, size, f"{secret.run_id}/{spec.name}", run_dir) for spec in _specs(kind)]


def _user_oov_rates(client_data, vocab, bug) -> list[list[float]]:
    from fedgen_debug.device import lm_data

    return [[lm_data.device_oov_rate(lm_data.device_tokens(client_data, cid, bug), vocab)]
            for cid in progress(sorted(client_data.client_ids), desc="OOV rate on devices")]


def _user_intensities(client_data) -> list[list[float]]:
    from fedgen_debug.data import client_data as cd

    return [[float(np.mean(cd.client_numpy(client_data, cid)["pixels"]))]
            for cid in progress(sorted(client_data.client_ids), desc="pixel intensity on devices")]


def release_population(kind: str, client_data, data_spec_text: str, run_dir: str, statistics) -> dict:
    """Charges and computes one population's aggregates into `run_dir` (once; a re-run reads them)."""
    from fedgen_debug.cli.data_cmd import dp_size_summary
    from fedgen_debug.data import client_data as cd
    from fedgen_debug.privacy.ledger import population_key
    from fedgen_debug.privacy import aggregates
    from fedgen_debug.runs import store
    from fedgen_debug.privacy.run_ledger import charge, open_run

    population = population_key(data_spec_text, client_data.client_ids)
    config_json = {"demo-data": {"data": data_spec_text, "kind": kind}}
    with store.exclusive(run_dir):
        secret, _ = open_run(run_dir, config_json)
        path = store.released(run_dir, store.DEVICE_METRICS)
        if os.path.exists(path):
            return store.read_json(path)
        size = len(client_data.client_ids)
        charge(stage_records(kind, population, size, secret, run_dir), run_dir, secret=secret, config_json=config_json)
        result = {"data": data_spec_text, "population": population,
                  **dp_size_summary(cd.client_sizes(client_data), population, kind, run_dir, secret)}
        result.pop("privacy")   # the run's privacy.json holds every release's ε, the report prints it
        means = {}
        for variant, spec in zip(VARIANTS, _specs(kind)):
            value = aggregates.compute(spec, statistics(variant), secret)
            means[variant] = {"mean": float(value.values[0]) / size, "stddev": float(value.stddev[0]) / size}
        result["oov_rate" if kind == "text" else "mean_pixel_intensity"] = means
        store.write_json(path, result)
        store.write_json(store.released(run_dir, store.STATUS), {"state": "finished"})
        return result


def run_data_stage(out: str, users: int, writers: int, seed: int, concat_fraction: float, invert_fraction: float,
                   vocab_size: int) -> dict:
    from fedgen_debug.device.pixels import PixelInversionBug
    from fedgen_debug.device.tokenization import TokenizationBug
    from fedgen_debug.data import jsonl, npz, synthetic_images, synthetic_text
    from fedgen_debug.device import lm_data

    text_spec = f"synthetic-text:users={users},seed={seed}"
    image_spec = f"synthetic-images:writers={writers},seed={seed}"
    concat_bug = TokenizationBug(concat_fraction, seed=seed)
    invert_bug = PixelInversionBug(invert_fraction, seed=seed)
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    text = synthetic_text.generate(synthetic_text.SyntheticTextConfig(users=users, seed=seed))
    jsonl.write_jsonl(text, os.path.join(out, "data", "synthetic_text.jsonl"))
    images = synthetic_images.generate(synthetic_images.SyntheticImagesConfig(writers=writers, seed=seed))
    npz.write_npz(images, os.path.join(out, "data", "synthetic_images.npz"))
    # The production vocabulary predates the bug and comes from public text (`lm_data`).
    vocab = lm_data.public_vocabulary(lm_data.default_vocabulary_source(text_spec), vocab_size)
    bugs = {"without_bug": None, "with_bug": concat_bug, "after_fix": concat_bug.as_fixed()}
    pixels = {"without_bug": images, "with_bug": invert_bug.apply(images), "after_fix": invert_bug.as_fixed().apply(images)}
    aggregates_dir = os.path.join(out, "device-aggregates")
    summary = {
        "text": release_population("text", text, text_spec, os.path.join(aggregates_dir, "text"),
                                   lambda variant: _user_oov_rates(text, vocab, bugs[variant])),
        "images": release_population("images", images, image_spec, os.path.join(aggregates_dir, "images"),
                                     lambda variant: _user_intensities(pixels[variant])),
    }
    summary["text"]["bug"] = f"tokenization: first two tokens glued in {concat_fraction:.0%} of sentences"
    summary["images"]["bug"] = f"pixel inversion on {invert_fraction:.0%} of devices"
    return summary


def print_data_stage(summary: dict, out: str) -> None:
    """The stage's report, with each aggregate's ε (`out`: the demo's --out, whose `device-aggregates/`
    runs hold their privacy.json)."""
    from fedgen_debug.cli.privacy_flags import privacy_lines

    t, i = summary["text"], summary["images"]
    print("fedgen-debug demo — synthetic federated data with injected bugs (every figure below is a DP release)")
    for name, s, unit in (("[text]  ", t, "sentences"), ("[images]", i, "images")):
        print(f"\n{name} {s['data']}: {s['clients']} users, ≈ {s['examples']:,.0f} ± {s['examples_stddev']:,.0f} {unit}")
        print(f"         bug: {s['bug']}")
        key, label, fmt = (("oov_rate", "mean OOV rate", "{:.2%}") if name.startswith("[text")
                           else ("mean_pixel_intensity", "mean pixel intensity", "{:.3f}"))
        values = " | ".join(f"{v.replace('_', ' ')} {fmt.format(s[key][v]['mean'])}" for v in VARIANTS)
        print(f"         {label} (DP, ± {fmt.format(s[key]['without_bug']['stddev'])}): {values}")
        kind = "text" if name.startswith("[text") else "images"
        print("\n".join("       " + line for line in privacy_lines(os.path.join(out, "device-aggregates", kind))))
