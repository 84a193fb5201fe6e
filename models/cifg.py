"""The CIFG-LSTM cell: LSTM with coupled input and forget gates (Greff et al. 2015, "LSTM: A search
space odyssey", variant CIFG) and an optional linear projection of the output (Sak et al. 2014), as
in the paper's word- and char-LMs (augenstein2020 App. B.2). No library ships one.

    i_t = σ(W_i x_t + R_i h_{t−1} + b_i)          input gate
    f_t = 1 − i_t                                 forget gate, coupled
    z_t = tanh(W_z x_t + R_z h_{t−1} + b_z)       block input
    c_t = f_t ⊙ c_{t−1} + i_t ⊙ z_t
    o_t = σ(W_o x_t + R_o h_{t−1} + b_o)          output gate
    m_t = o_t ⊙ tanh(c_t)
    h_t = P m_t  (with projection; else h_t = m_t)

Coupling saves a quarter of the LSTM's gate parameters, which matters for on-device models.
"""

from __future__ import annotations

import tensorflow as tf

from fedgen_debug.validation import check_at_least


class CIFGCell(tf.keras.layers.AbstractRNNCell):
    def __init__(self, units: int, projection_units: int | None = None, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        check_at_least("units", units, 1)
        if projection_units is not None:
            check_at_least("projection_units", projection_units, 1)
        self.units = units
        self.projection_units = projection_units
        self.seed = seed

    @property
    def output_size(self) -> int:
        return self.projection_units or self.units

    @property
    def state_size(self):
        return [self.units, self.output_size]  # [c, h]

    def build(self, input_shape):
        input_dim = int(input_shape[-1])
        glorot = tf.keras.initializers.GlorotUniform(seed=self.seed)
        self.kernel = self.add_weight(name="kernel", shape=(input_dim, 3 * self.units), initializer=glorot)
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(self.output_size, 3 * self.units),
            initializer=tf.keras.initializers.Orthogonal(seed=self.seed))
        self.bias = self.add_weight(name="bias", shape=(3 * self.units,), initializer="zeros")
        if self.projection_units:
            self.projection = self.add_weight(name="projection", shape=(self.units, self.projection_units),
                                              initializer=glorot)
        self.built = True

    def call(self, inputs, states):
        c_prev, h_prev = states
        # `bias_add`, not `+`: the bias's gradient is then BiasAddGrad's own fresh tensor each step. With `+`, a
        # 1-row batch's gradient was a view of the step's gate gradient, so TF's AddN over the time steps
        # found it reusable at times and not at others and summed the steps in another order: one client's
        # update differed in 3% of identical calls, and runs from one secret trained different models.
        gates = tf.nn.bias_add(tf.matmul(inputs, self.kernel) + tf.matmul(h_prev, self.recurrent_kernel), self.bias)
        i_pre, z_pre, o_pre = tf.split(gates, 3, axis=-1)
        i = tf.sigmoid(i_pre)
        c = (1.0 - i) * c_prev + i * tf.tanh(z_pre)
        m = tf.sigmoid(o_pre) * tf.tanh(c)
        h = tf.matmul(m, self.projection) if self.projection_units else m
        return h, [c, h]

    def get_config(self):
        return {**super().get_config(), "units": self.units, "projection_units": self.projection_units,
                "seed": self.seed}
