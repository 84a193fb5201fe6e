"""Argument checks that need no TensorFlow, run before a command imports it.

Importing TensorFlow and TFF takes 5-6 s on two cores, and a mistyped path, data spec, selector or `--bug` used to be
refused only after it. These checks refuse the same mistakes with the same words in well under a second; the
full checks still run where the work starts (`GANRun`, `LMRun`, the analyses)."""

from __future__ import annotations

import os

from fedgen_debug.data import spec as data_spec
from fedgen_debug.data.errors import DataError
from fedgen_debug.runs import store

_WHAT = {data_spec.IMAGES: "image", data_spec.TEXT: "text"}


def check_data(text: str, modality: str, command: str) -> None:
    """A data spec that parses, of `modality`, whose file (if it names one) exists."""
    spec = data_spec.parse_data_spec(text)
    if spec.modality != modality:
        raise ValueError(f"{command} needs {_WHAT[modality]} data. Found {text!r}.")
    if spec.source in data_spec.FILE_SOURCES and not os.path.exists(spec.path):
        raise DataError(spec.path, "file not found.")


def check_selector(text: str) -> None:
    # Imported here, as the other commands do: `fedgen_debug.selectors` is the installed package's mapping of
    # selectors/ (setup.cfg), and the parser is built from the source tree too (test_presets).
    from fedgen_debug.selectors import registry

    registry.parse_selector(text)


def check_bug(text: str | None, modality: str) -> None:
    """A `--bug` the catalog parses for `modality` (`bug_arg.bug_settings`: the fault classes need no TensorFlow
    until they touch data)."""
    from fedgen_debug.cli.bug_arg import bug_settings

    bug_settings(text, modality)


def check_runs(*run_dirs: str | None) -> None:
    """Each given directory holds a released run config (the first thing every run writes)."""
    for run_dir in run_dirs:
        if run_dir is not None:
            store.released_config(run_dir)
