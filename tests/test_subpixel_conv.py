"""The sub-pixel transposed convolution equals TF's, and the patches' custom gradients equal autodiff's
of the one-hot convolution, to second order (the gradient penalty's path)."""

import numpy as np
import pytest
import tensorflow as tf

from fedgen_debug.training import subpixel_conv


@pytest.mark.parametrize("output_hw, kernel_hw, stride, cin, cout", [
    ((28, 28), (4, 4), 2, 16, 8),   # the demo G's last transposed convolution
    ((14, 14), (4, 4), 2, 32, 16),  # its first
    ((13, 10), (6, 3), 3, 3, 2),    # odd sizes (SAME pads unevenly), a non-square kernel, stride 3
])
def test_conv2d_transpose_equals_tensorflows(output_hw, kernel_hw, stride, cin, cout):
    rng = np.random.default_rng(0)
    out_h, out_w = -(-output_hw[0] // stride), -(-output_hw[1] // stride)
    y = tf.constant(rng.normal(size=(3, out_h, out_w, cin)), tf.float32)
    kernel = tf.constant(rng.normal(size=(*kernel_hw, cout, cin)), tf.float32)
    want = tf.nn.conv2d_transpose(y, kernel, [3, *output_hw, cout], stride, "SAME")
    got = subpixel_conv.conv2d_transpose(y, kernel, output_hw, stride)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_conv2d_transpose_is_the_adjoint_of_the_strided_convolution():
    # <conv(x), y> = <x, convᵀ(y)>: what makes it the input gradient.
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(2, 28, 28, 3)), tf.float32)
    y = tf.constant(rng.normal(size=(2, 14, 14, 4)), tf.float32)
    kernel = tf.constant(rng.normal(size=(4, 4, 3, 4)), tf.float32)
    left = tf.reduce_sum(tf.nn.conv2d(x, kernel, 2, "SAME") * y)
    right = tf.reduce_sum(x * subpixel_conv.conv2d_transpose(y, kernel, (28, 28), 2))
    np.testing.assert_allclose(left, right, rtol=1e-4)


@pytest.mark.parametrize("kernel_hw, strides, padding, want", [
    ((4, 4), (2, 2), "same", True), ((4, 4), (2, 2), "valid", False), ((3, 3), (2, 2), "same", False),
    ((4, 2), (2, 2), "same", True), ((4, 4), (2, 1), "same", False), ((1, 1), (2, 2), "same", False),
    ((3, 3), (1, 1), "same", False)])
def test_supported(kernel_hw, strides, padding, want):
    assert subpixel_conv.supported(kernel_hw, strides, padding) is want


def test_patches_are_the_one_hot_convolution_and_twice_differentiable_the_same():
    rng = np.random.default_rng(2)
    x = tf.constant(rng.normal(size=(5, 28, 28, 1)), tf.float32)
    weights = tf.constant(rng.normal(size=(16, 3)), tf.float32)
    one_hot = tf.reshape(tf.eye(16), [4, 4, 1, 16])

    def penalty_and_gradient(take):  # d/dweights of |d out / d x|², as the gradient penalty takes it
        with tf.GradientTape() as outer:
            outer.watch(weights)
            with tf.GradientTape() as inner:
                inner.watch(x)
                patches = take(x)
                out = tf.reduce_sum(tf.nn.leaky_relu(tf.einsum("nhwp,po->nhwo", patches, weights)) ** 2)
            penalty = tf.reduce_sum(inner.gradient(out, x) ** 2)
        return patches, penalty, outer.gradient(penalty, weights)

    want = penalty_and_gradient(lambda images: tf.nn.conv2d(images, one_hot, 2, "SAME"))
    got = penalty_and_gradient(subpixel_conv.patches((4, 4), 2, (28, 28)))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-4 * float(tf.reduce_max(tf.abs(want[2]))))
