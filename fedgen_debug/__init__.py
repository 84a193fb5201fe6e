"""fedgen-debug: debug private, decentralized data with DP federated generative models.

The pipeline, in the order a newcomer can trace it:
data (`fedgen_debug.data`) -> bug injection (`fedgen_debug.bugs`) -> primary model ->
selector (`fedgen_debug.selectors`) -> DP-FedAvg trainer -> auxiliary model
(`fedgen_debug.models`) -> analysis -> run store -> app (`fedgen_debug.app`).
"""

__version__ = "0.1.0"
