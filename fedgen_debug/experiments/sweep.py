"""The one loop of comparisons (issue 54): train the runs of a comparison, analyze them, collect a row.

The demo's stages, the monitor's periods and the evaluation scripts describe what they compare as
`Comparison`s of `Arm`s and hand them to `Sweep` (or `run_sweep`); nothing else calls `train_lm` or
`train_gan` in a loop (tests/test_sweep.py checks it).

- An `Arm` is one ordinary run: its config (`training.lm_run.LMRun` or `training.gan_run.GANRun`), its
  run directory, and what a monitor passes for one period of a fleet (`client_data`, `app_update`,
  `context`, `warm_start_from`: see `experiments.lm.train_lm` / `experiments.gan.train_gan`). An arm
  without a config is a finished run directory analysed as it is (a reference trained elsewhere).
- `Sweep` trains every arm through `train_run`, which dispatches on the config's type. Training
  resumes: a finished run trains nothing again and charges nothing twice (the train functions
  re-find their ledger records), so a sweep run again continues where it stopped. An arm shared by
  several comparisons (one baseline against every bug fraction) trains once.
- Once a comparison's arms have trained, `analyze(comparison)` returns its row (any dict; the
  analysis is the caller's: `analysis.lm_analysis.analyze_lm`, `analysis.gan_report.analyze_gan`, a
  monitor's measurement); the rows come back in the comparisons' order.

Where the arms train: on `workers` (`runs.side_by_side.SideBySide`: runs side by side in worker
processes) or, by default, here, one after another. On workers the sweep keeps `ahead` comparisons
beyond the one it analyses queued, so the workers train the next pair while this process analyses
the current one (the demo's GAN stage); `queue` hands comparisons to them earlier still (the demo
queues all its LM runs before the primary CNN). In one process, handing a run over trains it at once,
so nothing is queued ahead: each comparison trains, then is analysed, before the next.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

from fedgen_debug.runs.side_by_side import SideBySide


@dataclasses.dataclass(frozen=True)
class Arm:
    """One run of a comparison. `run`: an `LMRun` or a `GANRun` (None: `run_dir` is a finished run,
    analysed as it is). The rest is what `train_lm` / `train_gan` take for a monitor's period:
    `client_data` (the devices present, instead of loading `run.data`), `app_update` (GAN only: a
    `device.transform.DeviceTransform` on top of the run's bug), `context` (added to the released
    config) and `warm_start_from` (a previous run directory)."""

    name: str
    run_dir: str
    run: object = None
    client_data: object = None
    app_update: object = None
    context: Mapping | None = None
    warm_start_from: str | None = None

    def __post_init__(self):
        if not self.name:
            raise ValueError(f"an arm needs a name. Found {self.name!r}.")
        if not self.run_dir:
            raise ValueError(f"arm {self.name!r} needs a run directory. Found {self.run_dir!r}.")
        if self.run is None and any(v is not None for v in (self.client_data, self.app_update, self.context,
                                                            self.warm_start_from)):
            raise ValueError(f"arm {self.name!r} has no run config to train, so it takes no training options.")

    def options(self) -> dict:
        """The keyword arguments of its train function that the arm sets."""
        given = {"client_data": self.client_data, "app_update": self.app_update, "context": self.context,
                 "warm_start_from": self.warm_start_from}
        return {key: value for key, value in given.items() if value is not None}


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Runs analysed together (a pair: bug against baseline, low against high accuracy; or a single
    run). `about`: what the comparison stands for (kind, bug fraction, seed, ...), for the caller's
    rows and announcements."""

    name: str
    arms: tuple[Arm, ...]
    about: Mapping = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "arms", tuple(self.arms))
        if not self.arms:
            raise ValueError(f"comparison {self.name!r} needs at least one arm.")
        names = [arm.name for arm in self.arms]
        if len(set(names)) != len(names):
            raise ValueError(f"comparison {self.name!r}: arm names must be unique. Found {names}.")

    @property
    def run_dirs(self) -> dict[str, str]:
        """{arm name: run directory}, in the arms' order."""
        return {arm.name: arm.run_dir for arm in self.arms}

    def arm(self, name: str) -> Arm:
        return next(arm for arm in self.arms if arm.name == name)


def train_run(run, run_dir: str, **options):
    """Trains (or resumes) one run into `run_dir` with the train function of its config's type
    (`LMRun`: `experiments.lm.train_lm`; `GANRun`: `experiments.gan.train_gan`); returns its
    `training.loop.TrainingResult`. `options`: that function's keyword arguments."""
    # Imported here: the train functions import TensorFlow, and the CLI's --help must not.
    from fedgen_debug.training.gan_run import GANRun
    from fedgen_debug.training.lm_run import LMRun

    if isinstance(run, GANRun):
        from fedgen_debug.experiments.gan import train_gan

        return train_gan(run, run_dir, **options)
    if isinstance(run, LMRun):
        from fedgen_debug.experiments.lm import train_lm

        if options.get("app_update") is not None:
            raise ValueError(f"{run_dir}: an app update (a device transform on images) applies to GAN runs only.")
        options.pop("app_update", None)
        return train_lm(run, run_dir, **options)
    raise TypeError(f"run must be an LMRun or a GANRun. Found {type(run).__name__}.")


def _train_arm(run, run_dir: str, options: dict) -> None:
    """A worker's call (importable, picklable arguments): the result's model weights stay there."""
    train_run(run, run_dir, **options)


class Sweep:
    """`Sweep(comparisons, workers, ahead).collect(analyze)`: the rows of `analyze(comparison)`, each
    called once the comparison's arms have trained (module docstring). `trainer`: what a worker calls
    with (run, run_dir, options); by default `train_run`. An evaluation that changes a preset in the
    worker's process (a spawned worker imports the presets afresh) passes an importable function of its
    own that does so and then calls `train_run`."""

    def __init__(self, comparisons: Sequence[Comparison], workers=None, ahead: int = 0,
                 trainer: Callable[[object, str, dict], None] | None = None):
        if ahead < 0:
            raise ValueError(f"ahead must be >= 0. Found {ahead}.")
        self.comparisons = tuple(comparisons)
        names = [c.name for c in self.comparisons]
        if len(set(names)) != len(names):
            raise ValueError(f"comparison names must be unique. Found {names}.")
        self._workers = workers if workers is not None else SideBySide(1)
        self._ahead = ahead
        self._trainer = trainer if trainer is not None else _train_arm
        self._queued = 0                     # comparisons handed to the workers, in order
        self._trained = {}                   # run_dir -> (arm, future, index of the comparison that queued it)
        self._started, self.train_seconds = {}, {}   # run_dir -> when queued; wall seconds until trained

    def queue(self, count: int | None = None) -> "Sweep":
        """Hands the arms of the first `count` comparisons (None: all) not handed over yet to the workers,
        in order (in one process: trains them now). An arm whose run directory was handed over before
        (by another comparison) is not trained twice; two different runs into one directory are refused."""
        count = len(self.comparisons) if count is None else min(count, len(self.comparisons))
        while self._queued < count:
            for arm in self.comparisons[self._queued].arms:
                if arm.run is None:
                    continue
                if arm.run_dir in self._trained:
                    earlier, _, _ = self._trained[arm.run_dir]
                    if (earlier.run, earlier.options()) != (arm.run, arm.options()):
                        raise ValueError(f"{arm.run_dir}: two different runs of the sweep train into this directory.")
                    continue
                self._started[arm.run_dir] = time.perf_counter()
                future = self._workers.submit(self._trainer, arm.run, arm.run_dir, arm.options())
                self._trained[arm.run_dir] = arm, future, self._queued
                if self._workers.in_process:
                    self.train_seconds[arm.run_dir] = time.perf_counter() - self._started[arm.run_dir]
            self._queued += 1
        return self

    def wait(self, comparison: Comparison) -> None:
        """Returns once every arm of `comparison` has trained (queued or not before); raises a run's error."""
        self.queue(self.comparisons.index(comparison) + 1)
        for arm in comparison.arms:
            if arm.run is not None:
                self._trained[arm.run_dir][1].result()
                self.train_seconds.setdefault(arm.run_dir, time.perf_counter() - self._started[arm.run_dir])

    def seconds(self, comparison: Comparison) -> float:
        """Wall seconds its arms took to train in this sweep (a finished run resumed: about none), a run
        shared with an earlier comparison counted there only."""
        index = self.comparisons.index(comparison)
        return sum(self.train_seconds.get(arm.run_dir, 0.0) for arm in comparison.arms
                   if arm.run_dir in self._trained and self._trained[arm.run_dir][2] == index)

    def collect(self, analyze: Callable[[Comparison], dict],
                announce: Callable[[Comparison], None] | None = None) -> list[dict]:
        """For each comparison in order: `announce(comparison)` (before waiting for its runs), its runs
        trained, the next `ahead` comparisons queued (on workers), then `analyze(comparison)`'s row."""
        rows = []
        for index, comparison in enumerate(self.comparisons):
            if announce is not None:
                announce(comparison)
            self.wait(comparison)
            if not self._workers.in_process:
                self.queue(index + 1 + self._ahead)   # they train while this process analyses
            rows.append(analyze(comparison))
        return rows


def run_sweep(comparisons: Sequence[Comparison], analyze: Callable[[Comparison], dict], *, workers=None,
              ahead: int = 0, announce: Callable[[Comparison], None] | None = None, trainer=None) -> list[dict]:
    """`Sweep(comparisons, workers, ahead, trainer).collect(analyze, announce)`."""
    return Sweep(comparisons, workers, ahead, trainer).collect(analyze, announce)
