"""The GAN scenario (paper §6, App. C): DP-FedAvg-GANs on the images of selected users or examples.

`train_gan`: the devices apply the app's (possibly buggy) preprocessing, run the primary CNN and a
selector (T4 by user accuracy, T2 by example correctness, T1 random) on their own data; the selected
population trains a DP-FedAvg-GAN (Algorithm 1) into a run directory. `load_generator` rebuilds the
generator for `gan_analysis`. The primary CNN is the modeler's pre-update model: given with
`primary=PATH`, or trained centrally on clean public stand-in data (synthetic handwriting of other
writers) into the run directory.

T4 without a threshold uses a DP quantile of the users' accuracies measured before the update (paper
Table 10: 25th percentile for "low", 75th for "high"); its privacy cost is a second record in the
run directory (`t4_threshold/privacy.json`), which the ledger adds to the population's total.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow as tf

from fedgen_debug.bugs import PixelInversionBug
from fedgen_debug.data import spec as data_spec
from fedgen_debug.models import cnn
from fedgen_debug.models.gan import build_discriminator, build_generator, gan_config
from fedgen_debug.scenarios import gan_data, primary_cnn
from fedgen_debug.seeding import client_rng
from fedgen_debug.selectors import registry
from fedgen_debug.selectors.base import AllOf, Selector
from fedgen_debug.selectors.criteria import ByUserMetric
from fedgen_debug.selectors.quantile import QuantileConfig, dp_quantile
from fedgen_debug.training import dp_fedavg_gan, loop
from fedgen_debug.training import run_dir as rd

PRESETS = ("paper", "demo", "test")
PRIMARY_FILE = "primary_cnn.npz"
POPULATION_FILE = "population.json"
THRESHOLD_DIR = "t4_threshold"
PUBLIC_STAND_IN = "synthetic-images:writers={writers},seed={seed}"
T4_QUANTILES = {"low": 0.25, "high": 0.75}
_SHUFFLE_STREAM = 0x6A5


@dataclasses.dataclass(frozen=True)
class GANRun:
    data: str
    select: str
    bug_fraction: float = 0.0
    preset: str = "demo"
    rounds: int | None = None
    seed: int = 0
    primary: str | None = None     # weights of the primary CNN (`primary_cnn.train_primary_cnn`)
    primary_classes: int = 62

    def __post_init__(self):
        if self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}. Found {self.preset!r}.")
        if data_spec.parse_data_spec(self.data).modality != "images":
            raise ValueError(f"train-gan needs image data. Found {self.data!r}.")
        registry.parse_selector(self.select)  # validates
        PixelInversionBug(self.bug_fraction)  # validates the fraction
        if self.rounds is not None and self.rounds < 1:
            raise ValueError(f"rounds must be >= 1. Found {self.rounds}.")

    def training_config(self, population: int) -> dp_fedavg_gan.GANTrainingConfig:
        config = dp_fedavg_gan.gan_training_config(self.preset, self.seed)
        training = config.training
        qn = min(training.dp.clients_per_round, population)
        training = dataclasses.replace(training, rounds=self.rounds or training.rounds,
                                       dp=dataclasses.replace(training.dp, clients_per_round=qn))
        return dataclasses.replace(config, training=training)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def train_public_primary(path: str, preset: str, seed: int, classes: int = 62) -> tf.keras.Model:
    """The pre-update primary CNN, trained centrally on clean public stand-in data (other writers)."""
    writers = {"test": 12, "demo": 100, "paper": 400}[preset]
    public = data_spec.load_client_data(PUBLIC_STAND_IN.format(writers=writers, seed=seed + 1000))
    config = cnn.cnn_config("test" if preset == "test" else "demo", num_classes=classes)
    return primary_cnn.train_primary_cnn(public, config, seed, 3, path)


def _primary(run: GANRun, out_dir: str) -> tuple[tf.keras.Model, str]:
    if run.primary is not None:
        return primary_cnn.load_primary_cnn(run.primary), run.primary
    path = os.path.join(out_dir, PRIMARY_FILE)
    if os.path.exists(path):
        return primary_cnn.load_primary_cnn(path), path
    return train_public_primary(path, run.preset, run.seed, run.primary_classes), path


def _threshold(selector: ByUserMetric, clean_data, model, population: str, out_dir: str, seed: int) -> float:
    """A DP quantile of user accuracy before the update; computed once per run directory."""
    path = os.path.join(out_dir, THRESHOLD_DIR)
    if os.path.exists(os.path.join(path, "threshold.json")):
        saved = rd.read_json(os.path.join(path, "threshold.json"))
        if saved["target_quantile"] != T4_QUANTILES[selector.direction]:
            raise ValueError(f"{out_dir} already has a T4 threshold for quantile {saved['target_quantile']}; "
                             "give the thresholds explicitly (threshold=...) to combine low and high.")
        return saved["threshold"]
    accuracies = gan_data.user_accuracies(clean_data, model)
    config = QuantileConfig(T4_QUANTILES[selector.direction], clients_per_round=min(100, len(accuracies)),
                            rounds=100, seed=seed)
    estimate = dp_quantile(accuracies, config, population, label=f"T4 threshold for {out_dir}")
    os.makedirs(path, exist_ok=True)
    estimate.privacy.write(path)
    rd.write_json(os.path.join(path, "threshold.json"), {"threshold": estimate.value,
                                                          "target_quantile": config.target_quantile})
    return estimate.value


def with_thresholds(selector: Selector, estimate) -> Selector:
    """`selector` with every threshold-less T4 part (also inside AllOf/AnyOf, e.g.
    `by-user-accuracy:low&by-example:misclassified`) given the threshold `estimate(part)`."""
    if isinstance(selector, ByUserMetric) and selector.threshold is None:
        return selector.with_threshold(estimate(selector))
    if isinstance(selector, AllOf):  # AnyOf is a subclass
        return dataclasses.replace(selector, parts=tuple(with_thresholds(p, estimate) for p in selector.parts))
    return selector


def train_gan(run: GANRun, out_dir: str) -> loop.TrainingResult:
    os.makedirs(out_dir, exist_ok=True)
    population_name = str(data_spec.parse_data_spec(run.data))
    clean = data_spec.load_client_data(run.data)
    # What the devices see after the app update: its (possibly buggy) preprocessing.
    app_data = PixelInversionBug(run.bug_fraction, seed=run.seed).apply(clean) if run.bug_fraction else clean
    model, primary_path = _primary(run, out_dir)
    selector = with_thresholds(registry.parse_selector(run.select),
                               lambda part: _threshold(part, clean, model, population_name, out_dir, run.seed))
    selected = gan_data.select_gan_data(app_data, model, selector)
    if selected.population.size == 0:
        raise ValueError(f"{run.select}: no device selected any image; nothing to train the GAN on.")
    rd.write_json(os.path.join(out_dir, POPULATION_FILE), {**selected.sizes(), "primary": os.path.abspath(primary_path)})
    config = run.training_config(selected.population.size)
    gan = gan_config(run.preset)
    process = dp_fedavg_gan.build_gan_process(lambda: build_generator(gan, run.seed),
                                              lambda: build_discriminator(gan, run.seed), config)
    batch = config.training.client.batch_size

    def client_dataset(cid):
        # Each device shuffles its own images (seeded by client), batches of B; at most n are used.
        images = selected.client_images(cid)
        order = client_rng(run.seed, cid, _SHUFFLE_STREAM).permutation(len(images))
        return tf.data.Dataset.from_tensor_slices(images[order]).batch(batch)

    return loop.train(process, selected.client_ids, client_dataset, config.training, out_dir, population_name,
                      label=f"GAN {run.select}", extra_config={"gan": run.to_json(), "gan_training": config.to_json()})


def load_generator(run_dir: str) -> tuple[tf.keras.Model, GANRun]:
    """The trained generator of a finished GAN run directory, and its GANRun."""
    run = GANRun(**rd.finished_run_config(run_dir, "gan", "train-gan")["gan"])
    generator = build_generator(gan_config(run.preset), run.seed)
    rd.load_model_weights(run_dir, generator)
    return generator, run


def generate(generator: tf.keras.Model, samples: int, seed: int) -> np.ndarray:
    """`samples` images in [-1, 1] from seeded standard-normal noise (BatchNorm in inference mode)."""
    noise = np.random.default_rng(seed).standard_normal((samples, generator.input_shape[-1])).astype(np.float32)
    return np.concatenate([generator(noise[i:i + 500], training=False).numpy() for i in range(0, samples, 500)])
