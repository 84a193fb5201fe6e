"""A strided convolution's transpose as a stride-1 convolution and `depth_to_space` (sub-pixel).

Why: on CPUs without AVX-512, oneDNN computes a strided convolution's input gradient
(`Conv2DBackpropInput`) with its `brgconv_strided:avx2` kernel. For the vectorized critic's first layer
(`vectorized_gan`: the patches of 1,024 one-channel images, a one-hot 4×4 stride-2 convolution) that
took many times its forward pass, once a D step (the gradient penalty's gradient); this way, a fraction
of that. Where channels are many it does not pay: G's transposed convolutions ran as fast either way,
and D's grouped second layer with its input gradient this way was slower (the gradient penalty
differentiates it again), so both keep TF's kernels. Timings: docs/performance.md.

The identity: with k a multiple of s, conv2d(x, kernel, s, SAME) is x padded, `space_to_depth(s)`, and
a (k/s)×(k/s) stride-1 VALID convolution whose kernel holds the s×s phases as channels. Its transpose
(adjoint) is therefore that stride-1 convolution's transpose (a "full" stride-1 convolution with the
kernel flipped) followed by `depth_to_space(s)` and the padding cropped. Same values as
`tf.nn.conv2d_transpose` up to float rounding (tests/test_subpixel_conv.py); only forward stride-1
convolutions run.
"""

from __future__ import annotations

import functools

import tensorflow as tf


def supported(kernel_hw, strides, padding: str) -> bool:
    """Whether `conv2d_transpose` covers a convolution: SAME padding, one stride of at least 2 for both
    axes (stride 1 has no slow strided kernel to avoid), and a kernel whose sides are multiples of it."""
    s = strides[0]
    return (padding.upper() == "SAME" and strides[0] == strides[1] and s >= 2
            and all(k >= s and k % s == 0 for k in kernel_hw))


def _same_padding_before(size: int, kernel: int, stride: int) -> int:
    out = -(-size // stride)
    return max((out - 1) * stride + kernel - size, 0) // 2


def conv2d_transpose(y, kernel, output_hw, stride: int):
    """`tf.nn.conv2d_transpose(y, kernel, [N, *output_hw, cout], stride, "SAME")`: y [N, oh, ow, cin],
    kernel [kh, kw, cout, cin] (as tf.nn.conv2d_transpose and Keras' Conv2DTranspose hold it), with kh
    and kw multiples of `stride` (`supported`). Returns [N, *output_hw, cout]."""
    kh, kw, cout, cin = kernel.shape
    s = stride
    height, width = output_hw
    kkh, kkw = kh // s, kw // s
    # The forward convolution's stride-1 kernel [kkh, kkw, (a, b, c), cin], i = bi·s + a, j = bj·s + b ...
    phases = tf.reshape(tf.transpose(tf.reshape(kernel, [kkh, s, kkw, s, cout, cin]), [0, 2, 1, 3, 4, 5]),
                        [kkh, kkw, s * s * cout, cin])
    # ... and its transpose: the stride-1 convolution "full" (padded by the kernel less one), flipped.
    flipped = tf.transpose(tf.reverse(phases, [0, 1]), [0, 1, 3, 2])
    padded = tf.pad(y, [[0, 0], [kkh - 1, kkh - 1], [kkw - 1, kkw - 1], [0, 0]])
    blocks = tf.nn.depth_to_space(tf.nn.conv2d(padded, flipped, 1, "VALID"), s)
    top, left = _same_padding_before(height, kh, s), _same_padding_before(width, kw, s)
    return blocks[:, top:top + height, left:left + width, :]


def one_hot_patch_filter(kernel_hw, dtype=tf.float32):
    """[kh, kw, 1, kh·kw]: the convolution filter whose output channel i·kw + j is pixel (i, j) of each
    kh×kw patch of a one-channel image."""
    kh, kw = kernel_hw
    return tf.reshape(tf.eye(kh * kw, dtype=dtype), [kh, kw, 1, kh * kw])


@functools.lru_cache(maxsize=None)
def patches(kernel_hw: tuple[int, int], stride: int, input_hw: tuple[int, int]):
    """A function x [N, H, W, 1] → every kh×kw patch [N, oh, ow, kh·kw] (channel i·kw + j = pixel (i, j)),
    SAME padding, twice differentiable with only forward convolutions: the patches are one convolution
    with a one-hot kernel, and its input gradient, the transposed convolution, runs as `conv2d_transpose`
    (whose own gradient is the patches again). Requires `supported(kernel_hw, (stride, stride), "SAME")`."""
    # The filter is built where it is used: a cached tensor would belong to the first caller's graph.
    @tf.custom_gradient
    def take(x):
        return tf.nn.conv2d(x, one_hot_patch_filter(kernel_hw, x.dtype), stride, "SAME"), put_back

    @tf.custom_gradient
    def put_back(dy):
        return conv2d_transpose(dy, one_hot_patch_filter(kernel_hw, dy.dtype), input_hw, stride), take

    return take
