"""Server optimizers as TFF optimizers (pure TF): SGD, heavy-ball momentum, Nesterov momentum and Adam
(FedAdam, Reddi et al. 2021: `momentum` is its β1; ε = 1e-3 as their LM experiments, so coordinates
that only DP noise moves are not scaled up to full steps).

TFF 0.87 ships SGD with heavy-ball momentum only; the paper's LMs use Nesterov momentum 0.99 on the
server. `NesterovSGD` follows Keras' formulation: a ← m·a + g, w ← w − lr·(g + m·a).
"""

from __future__ import annotations

import collections

import tensorflow as tf
import tensorflow_federated as tff

from fedgen_debug.training.config import ServerConfig


class NesterovSGD(tff.learning.optimizers.Optimizer):
    def __init__(self, learning_rate: float, momentum: float):
        self._lr = learning_rate
        self._momentum = momentum

    def initialize(self, specs):
        return collections.OrderedDict(
            learning_rate=self._lr, momentum=self._momentum,
            accumulator=tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), specs),
        )

    def next(self, state, weights, gradients):
        lr, m = state["learning_rate"], state["momentum"]
        accumulator = tf.nest.map_structure(lambda a, g: m * a + g, state["accumulator"], gradients)
        weights = tf.nest.map_structure(lambda w, g, a: w - lr * (g + m * a), weights, gradients, accumulator)
        return collections.OrderedDict(learning_rate=lr, momentum=m, accumulator=accumulator), weights

    def get_hparams(self, state):
        return collections.OrderedDict(learning_rate=state["learning_rate"], momentum=state["momentum"])

    def set_hparams(self, state, hparams):
        return collections.OrderedDict(state, **hparams)


def server_optimizer(config: ServerConfig) -> tff.learning.optimizers.Optimizer:
    if config.optimizer == "adam":
        return tff.learning.optimizers.build_adam(learning_rate=config.learning_rate, beta_1=config.momentum,
                                                  epsilon=1e-3)
    if config.optimizer == "nesterov":
        return NesterovSGD(config.learning_rate, config.momentum)
    momentum = config.momentum if config.optimizer == "momentum" else None
    return tff.learning.optimizers.build_sgdm(learning_rate=config.learning_rate, momentum=momentum)
