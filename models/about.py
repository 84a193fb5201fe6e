"""`fedgen_debug.models`: the primary and auxiliary models (Keras), installed from the card's `models/`.

This folder has no `__init__.py` on purpose: it is only importable as `fedgen_debug.models` (see
setup.cfg), so it can never be picked up as a top-level module from the repo root. The word/char
CIFG-LSTM language models and the GAN/CNN arrive with the LM and GAN scenarios.
"""
