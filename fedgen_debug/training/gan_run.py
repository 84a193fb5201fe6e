"""What a GAN run is: its frozen, validated config (`GANRun`), and how to rebuild its generator from the
released weights of a finished run (`load_generator`, `generate`, `released_d_step`: used by analysis,
the memorization checker and the monitor; loading never trains).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow as tf

from fedgen_debug.data import spec as data_spec
from fedgen_debug.device.canary_specs import parse_canaries
from fedgen_debug.device.catalog import parse_fault
from fedgen_debug.device.pixels import PixelInversionBug
from fedgen_debug.models.gan import GANConfig, build_generator
from fedgen_debug.models.primary import PrimaryContract
from fedgen_debug.runs import store
from fedgen_debug.selectors import registry
from fedgen_debug.training import dp_fedavg_gan, presets
from fedgen_debug.training import run_dir as rd
from fedgen_debug.training.config import PrivacySettings, check_public_init
from fedgen_debug.validation import check_fraction, check_at_least, check_in_range, check_one_of

# D's server step under strict selection. "fixed": the noised sum over the fixed qN (Algorithm 1), so k
# qualifying clients of the qN sampled move D by k/qN of their mean update. "selected": over the DP
# estimate of k (q × the released DP count of qualified users), so a small subpopulation (5% of
# devices inverted, a 5th-percentile cut) moves D as far per round as a large one. Post-processing of
# two charged releases: ε is unchanged, and so is the signal-to-noise ratio of a round; only the step.
D_STEPS = ("fixed", "selected")
@dataclasses.dataclass(frozen=True)
class GANRun(PrivacySettings):
    """One GAN run: the data, the selector, the simulated bug, the preset, the primary CNN, and the
    modeler's privacy settings (`PrivacySettings`)."""

    data: str
    select: str
    bug_fraction: float = 0.0
    preset: str = presets.DEFAULT_PRESET   # a name of `presets.GAN_PRESETS`
    seed: int = 0
    primary: str | None = None     # the primary model: the tool's CNN weights (.npz) or the modeler's model file
    primary_classes: int = 62
    canaries: str | None = None    # a `device.canary_specs` spec: glyphs inserted for the checker
    classes: int | None = None     # classes in the users' data (the modeler's); None: a DP count (`primary_fit`)
    d_step: str = "fixed"          # D's server step: `D_STEPS`
    cycle_client_data: bool = False  # clients short of n·B images cycle to n D steps (`GANTrainingConfig`)
    gen_ema: float = 0.0             # > 0: the released generator is a moving average (`GANTrainingConfig`)
    gen_upsample: str = "transpose"  # how G doubles its resolution (`models.gan.GANConfig.gen_upsample`)
    # The modeler's own model's pixels and outputs (`models.primary.PrimaryContract`).
    primary_background: str = "white"
    primary_output: str = "auto"
    primary_scale: float = 1.0
    # A pipeline fault of the device catalog on top of the paper's bug (`device.catalog`, e.g. "rotate:0.5"):
    # a simulation, to see what a fault looks like in the samples.
    fault: str | None = None
    # `public:SPEC`: G and D start from a WGAN-GP trained centrally on public stand-in images
    # (`experiments.public_init.pretrained_gan_weights`; no ε: nothing of the users enters them).
    init: str | None = None

    def __post_init__(self):
        presets.check_preset(self.preset)
        self.check_privacy_settings()
        if data_spec.parse_data_spec(self.data).modality != "images":
            raise ValueError(f"train-gan needs image data. Found {self.data!r}.")
        registry.parse_selector(self.select)  # validates
        check_fraction(self.bug_fraction, "bug_fraction")
        self.device_fault()
        check_public_init(self.init, self.data, "images")
        if self.canaries is not None:
            parse_canaries(self.canaries)
        if self.classes is not None:
            check_at_least("classes", self.classes, 2)
        check_in_range("gen_ema", self.gen_ema, 0.0, 1.0, high_inclusive=False)
        self.model_config()  # validates gen_upsample
        self.primary_contract()
        check_one_of("d_step", self.d_step, D_STEPS)
        if self.d_step == "selected" and self.selection != "strict":
            raise ValueError("d_step 'selected' scales strict selection's step; under selection "
                             f"{self.selection!r} every sampled user qualifies already.")

    def app_bug(self) -> PixelInversionBug | None:
        """The paper's inversion bug on the devices (None at 0%)."""
        return PixelInversionBug(self.bug_fraction, seed=self.seed) if self.bug_fraction else None

    def device_fault(self):
        """The catalog fault on the devices (a `DeviceTransform`), or None."""
        return None if self.fault is None else parse_fault(self.fault, "images", self.seed)

    def primary_contract(self) -> PrimaryContract:
        return PrimaryContract(self.primary_background, self.primary_output, self.primary_scale)

    def model_config(self) -> GANConfig:
        """The preset's networks, with the run's generator upsampling."""
        return presets.gan_model_config(self.preset, gen_upsample=self.gen_upsample)

    def training_config(self, population: int) -> dp_fedavg_gan.GANTrainingConfig:
        """The preset's values with the run's privacy settings; qN at most the population."""
        config = presets.gan_training_config(self.preset, self.seed)
        if self.cycle_client_data:
            config = dataclasses.replace(config, cycle_client_data=True)
        if self.gen_ema:
            config = dataclasses.replace(config, gen_ema=self.gen_ema)
        return dataclasses.replace(config, training=self.override(config.training, population))

    def to_json(self) -> dict:
        return self.saved_json(("canaries", "classes", "d_step", "cycle_client_data", "gen_ema", "gen_upsample",
                                "primary_background", "primary_output", "primary_scale", "fault", "init"))


def released_d_step(run_dir: str) -> dict:
    """What `_with_selected_d_step` released, or the fixed step of a run without it."""
    path = store.released(run_dir, store.D_STEP)
    return store.read_json(path) if os.path.exists(path) else {"d_step": "fixed", "scale": 1.0}


def load_generator(run_dir: str) -> tuple[tf.keras.Model, GANRun]:
    """The trained generator of a finished GAN run directory, and its GANRun."""
    run = GANRun(**store.finished_run_config(run_dir, "gan", "train-gan")["gan"])
    generator = build_generator(run.model_config(), run.seed)
    rd.load_model_weights(run_dir, generator)
    return generator, run


def generate(generator: tf.keras.Model, samples: int, seed: int) -> np.ndarray:
    """`samples` images in [-1, 1] from seeded standard-normal noise (BatchNorm in inference mode)."""
    noise = np.random.default_rng(seed).standard_normal((samples, generator.input_shape[-1])).astype(np.float32)
    return np.concatenate([generator(noise[i:i + 500], training=False).numpy() for i in range(0, samples, 500)])
