"""The GAN scenario (paper §6, App. C): DP-FedAvg-GANs on the images of selected users or examples.

`train_gan`: the devices apply the app's (possibly buggy) preprocessing, run the primary CNN and a
selector (T4 by user accuracy, T2 by example correctness, T1 random) on their own data, and a
DP-FedAvg-GAN (Algorithm 1) trains on what they selected. Before anything is computed the run charges
all its releases to the privacy ledger: the DP quantiles of T4 thresholds, the DP counts of the
selected subpopulation, and every training round. `load_generator` rebuilds the generator for
`gan_report`.

Selection (`selection`): `strict` (default) samples qN of all N users each round; a sampled device
that does not qualify trains on nothing and sends a zero update that still counts in the fixed
denominator, so ε is over all N users and no output depends on anyone's selection bit except through
DP. `paper`: the population is the users who qualified (the server learns who), ε over them only, as
augenstein2020 accounts; with a warning. How many qualified is released only as the DP count of
qualified users (population.json), and training is accounted with a DP lower bound computed from it
(`privacy.subpopulation`: its failure probability is added to δ); a DP count below qN refuses the run.

The primary CNN is the modeler's pre-update model: given with `primary=PATH`, or trained centrally on
clean public stand-in data (synthetic handwriting of other writers). Either way the run keeps its own
copy in `released/` (a public model), which the analysis reads. T4 without a threshold uses a DP
quantile of the users' accuracies before the update (paper Table 10: 25th percentile for "low", 75th
for "high") over all users.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os

import numpy as np
import tensorflow as tf

from fedgen_debug import rng_streams
from fedgen_debug.data import client_data as cd
from fedgen_debug.data import spec as data_spec
from fedgen_debug.models import cnn
from fedgen_debug.models.gan import build_discriminator, build_generator
from fedgen_debug.models.primary import is_model_file
from fedgen_debug.privacy import aggregates
from fedgen_debug.privacy.accounting import check_delta
from fedgen_debug.privacy.ledger import population_key
from fedgen_debug.privacy.quantile import QuantileConfig, dp_quantile, quantile_record
from fedgen_debug.privacy.subpopulation import PAPER_SELECTION_WARNING, SubpopulationBound
from fedgen_debug.runs import store
from fedgen_debug.privacy.run_ledger import charge, open_run
from fedgen_debug.device import canaries as device_canaries
from fedgen_debug.device import gan_canaries, gan_data
from fedgen_debug.device import label_presence
from fedgen_debug.training import gan_snapshots, primary_cnn
from fedgen_debug.analysis import gan_analysis, primary_fit
from fedgen_debug.seeding import client_rng
from fedgen_debug.selectors import registry
from fedgen_debug.selectors.base import AllOf, Selector
from fedgen_debug.selectors.criteria import ByUserMetric
from fedgen_debug.experiments import public_init
from fedgen_debug.training import dp_fedavg_gan, loop, presets
from fedgen_debug.training.gan_run import GANRun

logger = logging.getLogger(__name__)
PUBLIC_STAND_IN = "synthetic-images:writers={writers},seed={seed}"
REFERENCE_IMAGES = 5000   # public stand-in images whose features are a modeler's model's Fréchet reference
T4_QUANTILES = {"low": 0.25, "high": 0.75}
# ... but a round's noise is scaled with it: one round moves D by s·lr·zS√d/qN of noise in L2 (d: D's
# weights). Past about 1 the critic follows the noise. Real FEMNIST, a 1st-percentile cut (~10 writers,
# s ≈ 21, every update clipped): at S = 0.5, 4.2 a round, the low GAN drew salt and pepper; at S = 0.1,
# 0.83, white-on-black characters (the same ε and signal-to-noise ratio: clipped updates scale with S);
# the high-accuracy GANs (s ≈ 4) take 0.8. So s stops where a round's noise reaches this.
MAX_D_NOISE_STEP = 1.0
SELECTION_NOISE = 4.0   # the DP counts' z at 100 users (σ = 2.8 users), scaled with N


def selection_counts(population: int) -> aggregates.BoundedSum:
    """The DP counts of the selected subpopulation: users, and images kept (capped at 512 a user); the
    relative error of 100 users' at any N (`aggregates.scaled_noise`)."""
    return aggregates.BoundedSum("selected", (1.0, 512.0), aggregates.scaled_noise(SELECTION_NOISE, population))


def quantile_config(target: float, population: int) -> QuantileConfig:
    """The T4 threshold's DP quantile: about a tenth of the users (at most 100) per round, 100 rounds. The
    noise on a round's share of users below the estimate is 1/qN·z/2: z = 2 up to 20 users a round (0.1
    at the demo's 10), then z = qN/10 (0.05). ε ≈ 13 at N = 100; at the paper's N = 3,400 (qN = 100,
    z = 10) 0.51, where z = 2 would cost 4.0 of the pair's budget of 10 for a precision it does not use."""
    clients = max(1, min(100, population // 10))
    return QuantileConfig(target, clients_per_round=clients, rounds=100, noise_multiplier=max(2.0, clients / 10))


def _public_stand_in(preset: str, seed: int):
    writers = presets.primary_cnn_preset(preset).public_writers
    return data_spec.load_client_data(PUBLIC_STAND_IN.format(writers=writers, seed=seed + rng_streams.PUBLIC_STAND_IN_SEED_OFFSET))


def train_public_primary(path: str, preset: str, seed: int, classes: int = 62) -> tf.keras.Model:
    """The pre-update primary CNN, trained centrally on clean public stand-in data (other writers)."""
    recipe = presets.primary_cnn_preset(preset)
    config = presets.primary_cnn_config(preset, num_classes=classes)
    return primary_cnn.train_primary_cnn(_public_stand_in(preset, seed), config, seed, recipe.epochs, path)


def _primary(run: GANRun, out_dir: str) -> tf.keras.Model:
    """The run's own copy of the primary model (released: a public model), made once: trained on public
    stand-in data, copied from another run's CNN, or the modeler's own model file (`models.primary`, its
    features' reference computed on the clean public stand-in images)."""
    path = store.released(out_dir, store.PRIMARY)
    if not os.path.exists(primary_cnn.info_path(path)):   # the .json is written last
        if run.primary is None:
            train_public_primary(path, run.preset, run.seed, run.primary_classes)
        elif is_model_file(run.primary):
            public = _public_stand_in(run.preset, run.seed)
            images = np.concatenate([cd.client_numpy(public, cid)["pixels"] for cid in public.client_ids])
            primary_cnn.install_model_file(run.primary, run.primary_contract(), path, images[:REFERENCE_IMAGES])
        else:
            primary_cnn.copy_primary(run.primary, path)
    return primary_cnn.load_primary_cnn(path)


def t4_parts(selector: Selector) -> list[ByUserMetric]:
    """The threshold-less T4 parts of `selector` (also inside AllOf/AnyOf)."""
    if isinstance(selector, ByUserMetric):
        return [selector] if selector.threshold is None else []
    if isinstance(selector, AllOf):  # AnyOf is a subclass
        return [p for part in selector.parts for p in t4_parts(part)]
    return []


def with_thresholds(selector: Selector, estimate) -> Selector:
    """`selector` with every threshold-less T4 part (also inside AllOf/AnyOf, e.g.
    `by-user-accuracy:low&by-example:misclassified`) given the threshold `estimate(part)`."""
    if isinstance(selector, ByUserMetric) and selector.threshold is None:
        return selector.with_threshold(estimate(selector))
    if isinstance(selector, AllOf):  # AnyOf is a subclass
        return dataclasses.replace(selector, parts=tuple(with_thresholds(p, estimate) for p in selector.parts))
    return selector


def _thresholds(targets: list[float], clean_data, model, everyone: loop.Population, secret, out_dir: str) -> dict:
    """DP quantiles of user accuracy before the update, by target quantile; computed once per run."""
    path = store.released(out_dir, store.THRESHOLD)
    saved = store.read_json(path) if os.path.exists(path) else {}
    missing = [q for q in targets if f"{q:g}" not in saved]
    if missing:
        accuracies = gan_data.user_accuracies(clean_data, model)
        for q in missing:
            saved[f"{q:g}"] = dp_quantile(everyone.client_ids, accuracies, quantile_config(q, everyone.size),
                                          secret).value
        store.write_json(path, saved)
    return {q: saved[f"{q:g}"] for q in targets}


def target_quantile(part: ByUserMetric) -> float:
    """The quantile of user accuracy a threshold-less T4 part cuts at: its own, else the paper's."""
    return part.quantile if part.quantile is not None else T4_QUANTILES[part.direction]


def _quantile_targets(selector: Selector) -> list[float]:
    return sorted({target_quantile(p) for p in t4_parts(selector)})


def training_population(run: GANRun, everyone: loop.Population) -> loop.Population:
    """Who may be sampled: every user, and Ramaswamy's synthetic canary devices (under the users' key)."""
    if run.canaries is None:
        return everyone
    return loop.Population(everyone.key, everyone.client_ids + device_canaries.synthetic_device_ids(run.canaries))


def release_records(run: GANRun, everyone: loop.Population, secret, out_dir: str) -> list:
    """The ledger records of every DP release of the run, before it computes any: the DP quantiles of
    T4 thresholds, the DP counts of the selected subpopulation, and training (under strict selection;
    the paper's subpopulation is known only after the devices select, and charged by the loop)."""
    records = [quantile_record(quantile_config(q, everyone.size), everyone.key, everyone.size,
                               f"{secret.run_id}/t4-quantile-{q:g}", f"T4 threshold: DP quantile {q:g}", out_dir)
               for q in _quantile_targets(registry.parse_selector(run.select))]
    if _counts_labels(run):
        # The event of a BoundedSum does not depend on its dimension (z·clip over 2·clip), so the
        # record is known before the primary model says how many classes it has.
        records.append(aggregates.aggregate_record(label_presence.labels_present_spec(2, everyone.size), everyone.key,
                                                   everyone.size, f"{secret.run_id}/labels-present", out_dir))
    records.append(aggregates.aggregate_record(selection_counts(everyone.size), everyone.key, everyone.size,
                                               f"{secret.run_id}/selection-counts", out_dir))
    if run.selection == "strict":
        trained = training_population(run, everyone)
        records.append(loop.training_record(run.training_config(trained.size).training, trained, secret,
                                            f"GAN {run.select}", out_dir))
    return records


def _counts_labels(run: GANRun) -> bool:
    """Whether the run releases a DP count of the labels present: it checks DP T4 thresholds and the
    modeler did not say how many classes the data has."""
    return bool(_quantile_targets(registry.parse_selector(run.select))) and run.classes is None


def _check_primary_fit(run: GANRun, thresholds: dict, clean_data, model, everyone: loop.Population, secret,
                       out_dir: str) -> None:
    """Writes released/primary_fit.json (once per run) and logs its warnings."""
    if not thresholds:
        return
    fit = primary_fit.released_fit(out_dir)
    if fit is None:
        labels = None
        if run.classes is not None:
            classes, source = run.classes, "as given"
        else:
            spec = label_presence.labels_present_spec(cnn.num_classes(model), everyone.size)
            counts = aggregates.compute(spec, label_presence.label_presence(clean_data, everyone.client_ids,
                                                                         spec.dim), secret)
            labels = counts.as_dict()
            classes = label_presence.classes_present(counts.values, counts.stddev, counts.devices)
            source = "a DP count of the labels present"
            if classes is None:
                classes, source = spec.dim, ("the primary model's outputs: the DP count of the labels present is "
                                             "too noisy for this few users")
        fit = {**primary_fit.check(thresholds, classes, source), "labels_present": labels, "dp": True}
        store.write_json(store.released(out_dir, store.PRIMARY_FIT), fit)
    for warning in fit["warnings"]:
        logger.warning("%s: %s", out_dir, warning)


def train_gan(run: GANRun, out_dir: str, *, client_data=None, app_update=None, context: dict | None = None,
              warm_start_from: str | None = None) -> loop.TrainingResult:
    """Trains (or resumes) the run into `out_dir`. A monitor (`monitor.runner`) passes one period of a
    fleet: `client_data` (the devices present, instead of loading `run.data`), `app_update` (a
    `device.transform.DeviceTransform` on top of the run's bug: the rollout's stage), `context` (added to the released config, so a
    resume must match it) and `warm_start_from` (the previous period's run)."""
    with store.exclusive(out_dir):
        return _train_gan(run, out_dir, client_data, app_update, context, warm_start_from)


def _train_gan(run: GANRun, out_dir: str, client_data, app_update, context, warm_start_from) -> loop.TrainingResult:
    clean = client_data if client_data is not None else data_spec.load_client_data(run.data)
    # The ledger's population is all users of the data, also when `client_data` holds some of them (a
    # monitoring period's devices).
    everyone = loop.Population(population_key(run.data, None if client_data is not None else clean.client_ids),
                               tuple(clean.client_ids))
    if run.delta is not None:
        check_delta(run.delta, everyone.size)
    trained = training_population(run, everyone)
    config = run.training_config(trained.size)
    label = f"GAN {run.select}"
    extra = {"gan": run.to_json(), "gan_training": config.to_json(), **(context or {})}
    config_json = loop.run_config(config.training, everyone, label, extra)
    if run.primary is not None and not os.path.exists(primary_cnn.info_path(store.released(out_dir, store.PRIMARY))):
        primary_cnn.check_primary(run.primary, run.primary_contract())   # a bad model is refused before any charge
    secret, _ = open_run(out_dir, config_json)
    selector = registry.parse_selector(run.select)
    targets = _quantile_targets(selector)
    # Every release of the run, charged before any is computed (all or nothing).
    charge(release_records(run, everyone, secret, out_dir), out_dir, secret=secret, config_json=config_json,
           delta=run.delta)

    # What the devices see after the app update: its (possibly buggy) preprocessing.
    app_data = clean
    for transform in (run.app_bug(), run.device_fault()):
        if transform is not None:
            app_data = transform.apply(app_data)
    if app_update is not None:
        app_data = app_update.apply(app_data)
    model = _primary(run, out_dir)
    thresholds = _thresholds(targets, clean, model, everyone, secret, out_dir)
    _check_primary_fit(run, thresholds, clean, model, everyone, secret, out_dir)
    if run.canaries is not None:
        canaries = gan_canaries.canaries_for_run(run.canaries, run.seed, cnn.num_classes(model), out_dir)
        app_data = gan_canaries.with_canaries(app_data, canaries, secret, run.seed)
    selector = with_thresholds(selector, lambda part: thresholds[target_quantile(part)])
    selected = gan_data.select_gan_data(app_data, model, selector)
    _release_selection_counts(selected, everyone, out_dir, secret)
    gan = run.model_config()
    process_config = config
    if run.d_step == "selected":
        disc_params = build_discriminator(gan, run.seed).count_params()
        process_config = _with_selected_d_step(config, everyone.size, out_dir, disc_params)
    if config.training.dp.clip_quantile is not None and run.selection == "strict":
        process_config = _with_selected_clip_step(process_config, everyone.size, out_dir)
    population = trained
    if run.selection == "paper":
        logger.warning(PAPER_SELECTION_WARNING)
        population = paper_population(selected.client_ids, trained, config.training.dp.clients_per_round, out_dir)
        store.write_private_json(store.server(out_dir, store.SELECTION), {"client_ids": list(selected.client_ids)})

    def client_examples(cid, round_num):
        # On the device: its selected images (none if it does not qualify), shuffled afresh each round
        # (a device holding more than n·B uses all of them over the rounds); the process takes them in
        # batches of B, n at most, cycling if the config says so (`dp_fedavg_gan.client_step_examples`).
        images = selected.client_images(cid)
        return images[client_rng(run.seed, cid, rng_streams.GAN_CLIENT_SHUFFLE, round_num).permutation(len(images))]

    def build(secret_):
        return dp_fedavg_gan.build_gan_process(lambda: build_generator(gan, run.seed),
                                               lambda: build_discriminator(gan, run.seed), process_config, secret_)

    snapshot = gan_snapshots.snapshot_fn(lambda: build_generator(gan, run.seed), run.seed, out_dir,
                                         gan_analysis.snapshot_statistics)
    def pretrained():   # called only when the run starts (a resume reads its checkpoint)
        return public_init.pretrained_gan_weights(run.init, gan, run.seed)

    result = loop.train(build, population, client_examples, config.training, out_dir, label=label, extra_config=extra,
                        evaluate_fn=snapshot, secret=secret, delta=run.delta, warm_start_from=warm_start_from,
                        initial_weights=pretrained if run.init is not None else None)
    store.publish_snapshots(out_dir)
    return result


def _release_selection_counts(selected: gan_data.GanData, everyone: loop.Population, out_dir: str, secret) -> None:
    """DP counts of the users who qualified and the images they kept (paper Tables 11/12), once per run."""
    path = store.released(out_dir, store.POPULATION)
    if os.path.exists(path):
        return
    kept = selected.kept_per_client()
    records = [[1.0 if cid in kept else 0.0, float(kept.get(cid, 0))] for cid in everyone.client_ids]
    spec = selection_counts(everyone.size)
    total = aggregates.compute(spec, records, secret)
    (users, images), (users_sd, images_sd) = total.values, total.stddev
    # Clamped to what is possible (post-processing: a noised count below 0 says "about none").
    users = min(max(float(users), 0.0), float(everyone.size))
    images = min(max(float(images), 0.0), everyone.size * spec.upper[1])
    store.write_json(path, {"users": float(users), "users_stddev": float(users_sd), "users_total": everyone.size,
                            "images": float(images), "images_stddev": float(images_sd),
                            "images_cap_per_user": spec.upper[1], "selector": selected.population.selector,
                            "dp": True})


def paper_population(qualified, trained: loop.Population, clients_per_round: int, out_dir: str) -> loop.Population:
    """The paper's subpopulation as the loop samples it: the qualified devices (padded to qN), accounted
    with the DP lower bound of the released DP count of qualified users (`privacy.subpopulation`), so
    that nothing released or printed depends on how many qualified but through that count. Raises
    `PaperSelectionRefused` when the DP count is below qN."""
    counts = store.read_json(store.released(out_dir, store.POPULATION))
    bound = SubpopulationBound(counts["users"], counts["users_stddev"], trained.size, clients_per_round)
    return loop.paper_subpopulation(trained, qualified, bound)


def d_step_scale(users: float, users_stddev: float, population: int, clients_per_round: int) -> float:
    """qN / k̂, k̂ = qN × users / population the qualifying clients a round samples in expectation.
    A count within 3 standard deviations of zero is not trusted below that bound, and k̂ >= 1."""
    users = max(users, 3.0 * users_stddev, population / clients_per_round)
    return population / users


def _released_count_scale(config, population: int, out_dir: str) -> tuple[dict, float]:
    """The released DP counts (population.json) and their `d_step_scale` at the config's qN."""
    counts = store.read_json(store.released(out_dir, store.POPULATION))
    return counts, d_step_scale(counts["users"], counts["users_stddev"], population,
                                config.training.dp.clients_per_round)


def d_noise_step(config, disc_params: int) -> float:
    """The L2 norm by which one round's DP noise moves D at the fixed step: lr·zS√d/qN (d: D's weights;
    S the first round's clip when it adapts)."""
    dp = config.training.dp
    return config.training.server.learning_rate * dp.noise_multiplier * dp.clip * math.sqrt(disc_params) / dp.clients_per_round


def _with_selected_d_step(config, population: int, out_dir: str, disc_params: int):
    """The config whose D server learning rate is scaled by `d_step_scale` of the released DP count, at
    most so far that one round's noise moves D by `MAX_D_NOISE_STEP` (released/d_step.json says by how
    much). Only the process gets it: the run's config, and with it a resume's check, stays the preset's.
    With SGD or momentum (the presets') a learning rate × s is the mean over qN/s clients; Adam
    normalizes its steps, so there it only scales the step size."""
    counts, wanted = _released_count_scale(config, population, out_dir)
    server = config.training.server
    noise_step = d_noise_step(config, disc_params)
    scale = min(wanted, max(1.0, MAX_D_NOISE_STEP / noise_step)) if noise_step > 0 else wanted
    store.write_json(store.released(out_dir, store.D_STEP),
                     {"d_step": "selected", "scale": scale, "server_learning_rate": server.learning_rate * scale,
                      "from": "released DP count of qualified users (population.json)", "dp": True,
                      "count_scale": wanted, "noise_step": noise_step * scale})
    logger.info("%s: D's server step × %.3g (DP count of qualified users %.1f of %d%s)", out_dir, scale,
                counts["users"], population, f"; × {wanted:.3g} capped by the noise" if scale < wanted else "")
    server = dataclasses.replace(server, learning_rate=server.learning_rate * scale)
    return dataclasses.replace(config, training=dataclasses.replace(config.training, server=server))


def _with_selected_clip_step(config, population: int, out_dir: str):
    """The config whose adaptive clip steps `d_step_scale` times faster. Under strict selection most
    sampled devices send nothing and report the midpoint (`dp_query.AdaptiveClipSumQuery`), so the
    unclipped fraction moves by only k/qN of the qualifying clients' signal: a 5% cut (k ≈ 5 of qN = 92)
    would take ~300 rounds to bring a clip from 0.5 to 0.1. Scaled, the clip moves as fast as if every
    sampled client qualified (the count's noise scales too: ε unchanged). Post-processing of the
    released DP count; the run's config keeps the preset's step, as with `_with_selected_d_step`."""
    counts, scale = _released_count_scale(config, population, out_dir)
    dp = config.training.dp
    logger.info("%s: the adaptive clip's step × %.3g (DP count of qualified users %.1f of %d)", out_dir, scale,
                counts["users"], population)
    dp = dataclasses.replace(dp, clip_learning_rate=dp.clip_learning_rate * scale)
    return dataclasses.replace(config, training=dataclasses.replace(config.training, dp=dp))
