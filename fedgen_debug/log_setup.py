"""How a fedgen-debug process logs: the CLI and the worker processes it starts (`runs.side_by_side`).

The commands' reports (stdout) are what a modeler reads; logs go to stderr and only add to them:
- at the default level (WARNING), only warnings no report says: the ε of each release and its
  weak-privacy mark are in the reports, so `privacy.run_ledger.charge` logs them at INFO;
- -v (INFO) and -vv (DEBUG) show progress and details, the charges among them.
Third-party noise a modeler cannot act on stays out of a default run: TensorFlow's tf.function
retracing warnings (logger "tensorflow", shown from -v on) and matplotlib's "Glyph … missing from
current font" warnings (shown at -vv). Worker processes are set up the same way, with the parent's
level, so a run logs alike whether it trains here or on a worker.
"""

from __future__ import annotations

import logging
import warnings

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
LEVELS = (logging.WARNING, logging.INFO, logging.DEBUG)
_GLYPH_MISSING = r"Glyph .* missing from"


def level_of(verbosity: int) -> int:
    """The logging level of `verbosity` -v flags."""
    return LEVELS[min(max(verbosity, 0), len(LEVELS) - 1)]


def configure(level: int) -> None:
    """Logs at `level` to stderr, with third-party noise quieted as the module docstring says."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
    logging.getLogger().setLevel(level)   # basicConfig leaves a root that already has a handler as it is
    # TensorFlow's logger has no level of its own until TF sets one; it is set before TF is imported.
    logging.getLogger("tensorflow").setLevel(logging.NOTSET if level <= logging.INFO else logging.ERROR)
    if level > logging.DEBUG:
        warnings.filterwarnings("ignore", message=_GLYPH_MISSING, category=UserWarning)
