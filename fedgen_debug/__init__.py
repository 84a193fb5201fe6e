"""fedgen-debug: debug private, decentralized data with DP federated generative models.

The pipeline, in the order a newcomer can trace it:
data (`fedgen_debug.data`) -> what the devices do to it (`fedgen_debug.device`: bugs, canaries, the
primary model and a selector (`fedgen_debug.selectors`) on each device's own data) -> DP-FedAvg
(`fedgen_debug.training`, accounted and charged by `fedgen_debug.privacy`) -> auxiliary model
(`fedgen_debug.models`) in the run store (`fedgen_debug.runs`) -> analysis (`fedgen_debug.analysis`) ->
app (`fedgen_debug.app`). `fedgen_debug.experiments` runs that pipeline for the runs of a comparison.
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
