"""fedgen-debug: debug private, decentralized data with DP federated generative models.

The pipeline, in the order a newcomer can trace it:
data (`fedgen_debug.data`) -> bug injection (`fedgen_debug.bugs`) -> primary model ->
selector (`fedgen_debug.selectors`) -> DP-FedAvg trainer -> auxiliary model
(`fedgen_debug.models`) -> analysis -> run store -> app (`fedgen_debug.app`).
"""

import os

__version__ = "0.1.0"

# TensorFlow turns oneDNN on by default only on CPUs with AVX-512 VNNI/BF16 or AMX; without it, TF's CPU
# kernels cannot differentiate a grouped convolution ("Gradients for grouped convolutions are not
# supported on CPU"), which the `tf` backend's vectorized GAN critic needs (an AMD EPYC without AVX-512
# is such a CPU). TF reads the setting when it is imported, so it is set here, before any module of the
# package imports TF; a user's own setting wins. Imported TF first? `vectorized_gan.runs_here` finds
# out and the GAN clients run one by one instead.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
