"""DP-FedAvg with fixed-size rounds (augenstein2020 Alg. 2): pure-TF client/server updates, a thin
TFF layer building the `initialize`/`next` process, and the training loop that writes a run directory."""
