"""Image pipeline faults a device can have, as `DeviceTransform`s (`device.faults.DeviceFault`): the
test bed of "diagnose the bug nobody named" (issue 55).

Each is a frozen dataclass `(fraction, seed=0, fixed=False, <settings>)`. A device is hit when its own
draw is below `fraction` (local, nested shares); on a hit device every image goes through the fault, in
numpy on the device's own arrays. Pixels stay float32 in [0, 1] with the canonical format's convention
(`data.client_data`): 1.0 is the white background, ink is dark. Fill values, "thicker" and "fainter" are
meant in that convention. Labels and shapes (N, 28, 28) are untouched.

The faults, with their settings [defaults] (`NAME:FRACTION,key=value` in `device.catalog.parse_bug`):
- rotate: rotates counter-clockwise (multiples of 90° exactly) [degrees (90)]
- rotate_small: a small tilt, bilinear, background fill [degrees (20)]
- mirror: left-right mirror (a front camera's selfie view)
- flip: upside down (rows reversed)
- transpose: rows and columns swapped (a wrong axis order / reshape)
- blur: Gaussian blur [sigma (1.0) pixels]
- rescale: down-sampled by block means then up by repetition: blocky [factor (2), divides 28]
- shift: translated, background fill [rows (3), cols (3)]
- zoom: glyph scaled about the centre (> 1 bigger and cropped, < 1 smaller) [scale (1.5)]
- contrast: ink compressed toward the background: x → 1 − factor·(1 − x) [factor (0.4)]
- gamma: a second gamma curve: x → x^gamma (greys darker) [gamma (2.2)]
- normalize_twice: a standardization (x − mean)/std applied once more, clipped [mean (0.1307), std (0.3081)]
- noise: Gaussian (sigma = amount) or salt-and-pepper (rate = amount) noise [kind (gaussian), amount (0.2)]
- jpeg: a JPEG round trip (PIL) at low quality [quality (10)]
- threshold: binarized: x ≥ level → 1 else 0 [level (0.5)]
- erode: strokes thinner (ink eroded: a max filter on white-background pixels) [radius (1)]
- dilate: strokes thicker (ink dilated: a min filter) [radius (1)]
- mark: a mark drawn into every image, under the ink: a ruled line across row 21 (paper showing through),
  a 1-pixel frame (a scanner's border), or a 4×4 stamp in the bottom-right corner (a date, a logo)
  [kind (line), darkness (0.5): how much darker than the background]

normalize_twice: a model's input pipeline standardizes once, `(x − mean)/std` (defaults: MNIST's
constants, the most copied line of image preprocessing); a device that standardizes data that is already
standardized feeds `((x − mean)/std − mean)/std`. Written back in the [0, 1] units the model's pipeline
expects (undoing the one standardization it does itself), that is `(x − mean)/std`, clipped to [0, 1]:
greys above mean + std become white, the rest stretched.
"""

from __future__ import annotations

import collections
import dataclasses
import io
from typing import ClassVar

import numpy as np
from PIL import Image
from scipy import ndimage

from fedgen_debug.device.faults import DeviceFault
from fedgen_debug import rng_streams
from fedgen_debug.seeding import client_rng
from fedgen_debug.validation import check_in_range, check_one_of, check_positive

BACKGROUND = 1.0          # the canonical format's white background
NOISE_KINDS = ("gaussian", "salt_pepper")
MARK_KINDS = ("line", "frame", "stamp")


@dataclasses.dataclass(frozen=True)
class ImageFault(DeviceFault):
    """An image fault: `transform_images` maps one device's (N, H, W) float32 pixels to new pixels."""
    modality: ClassVar[str] = "images"

    def transform_images(self, pixels: np.ndarray, client_id: str) -> np.ndarray:
        raise NotImplementedError

    def device_arrays(self, client_id: str, arrays) -> collections.OrderedDict:
        out = collections.OrderedDict(arrays)
        pixels = np.asarray(arrays["pixels"], dtype=np.float32)
        if len(pixels):
            out["pixels"] = np.clip(self.transform_images(pixels, client_id), 0.0, 1.0).astype(np.float32)
        return out


def _per_image(pixels: np.ndarray, transform) -> np.ndarray:
    """`transform(image)` on each 2-D image of the stack (for operations that take one image)."""
    return np.stack([transform(image) for image in pixels])


@dataclasses.dataclass(frozen=True)
class Rotate(ImageFault):
    degrees: float = 90.0
    name: ClassVar[str] = "rotate"

    def __post_init__(self):
        super().__post_init__()
        if not np.isfinite(self.degrees) or self.degrees % 360.0 == 0.0:
            raise ValueError(f"degrees must be finite and not a multiple of 360. Found {self.degrees}.")

    def transform_images(self, pixels, client_id):
        quarter_turns, rest = divmod(self.degrees, 90.0)
        if rest == 0.0:     # exact: no interpolation, no corners lost
            return np.rot90(pixels, int(quarter_turns) % 4, axes=(1, 2))
        return ndimage.rotate(pixels, self.degrees, axes=(1, 2), reshape=False, order=1, mode="constant",
                              cval=BACKGROUND)


@dataclasses.dataclass(frozen=True)
class RotateSmall(Rotate):
    degrees: float = 20.0
    name: ClassVar[str] = "rotate_small"


@dataclasses.dataclass(frozen=True)
class Mirror(ImageFault):
    name: ClassVar[str] = "mirror"

    def transform_images(self, pixels, client_id):
        return pixels[:, :, ::-1]


@dataclasses.dataclass(frozen=True)
class Flip(ImageFault):
    name: ClassVar[str] = "flip"

    def transform_images(self, pixels, client_id):
        return pixels[:, ::-1, :]


@dataclasses.dataclass(frozen=True)
class Transpose(ImageFault):
    name: ClassVar[str] = "transpose"

    def transform_images(self, pixels, client_id):
        return np.swapaxes(pixels, 1, 2)


@dataclasses.dataclass(frozen=True)
class Blur(ImageFault):
    sigma: float = 1.0
    name: ClassVar[str] = "blur"

    def __post_init__(self):
        super().__post_init__()
        check_positive("sigma", self.sigma)

    def transform_images(self, pixels, client_id):
        return ndimage.gaussian_filter(pixels, sigma=(0.0, self.sigma, self.sigma), mode="constant",
                                       cval=BACKGROUND)


@dataclasses.dataclass(frozen=True)
class Rescale(ImageFault):
    """Low resolution: each factor×factor block becomes its mean, shown at the original size."""
    factor: int = 2
    name: ClassVar[str] = "rescale"

    def __post_init__(self):
        super().__post_init__()
        if self.factor < 2 or 28 % self.factor:
            raise ValueError(f"factor must be an integer ≥ 2 that divides 28. Found {self.factor}.")

    def transform_images(self, pixels, client_id):
        n, height, width = pixels.shape
        f = self.factor
        blocks = pixels.reshape(n, height // f, f, width // f, f).mean(axis=(2, 4))
        return np.repeat(np.repeat(blocks, f, axis=1), f, axis=2)


@dataclasses.dataclass(frozen=True)
class Shift(ImageFault):
    """Translated `rows` down and `cols` right (negative: up/left); what leaves the frame is lost."""
    rows: int = 3
    cols: int = 3
    name: ClassVar[str] = "shift"

    def __post_init__(self):
        super().__post_init__()
        check_in_range("rows", self.rows, -27, 27)
        check_in_range("cols", self.cols, -27, 27)
        if self.rows == 0 and self.cols == 0:
            raise ValueError("shift: rows and cols are both 0: the shift would change nothing.")

    def transform_images(self, pixels, client_id):
        return ndimage.shift(pixels, (0, self.rows, self.cols), order=0, mode="constant", cval=BACKGROUND)


@dataclasses.dataclass(frozen=True)
class Zoom(ImageFault):
    scale: float = 1.5
    name: ClassVar[str] = "zoom"

    def __post_init__(self):
        super().__post_init__()
        check_in_range("scale", self.scale, 0.25, 4.0)

    def transform_images(self, pixels, client_id):
        centre = (np.array(pixels.shape[1:]) - 1) / 2.0
        # output pixel p samples the input at centre + (p - centre) / scale
        offset = centre - centre / self.scale
        return _per_image(pixels, lambda image: ndimage.affine_transform(
            image, np.eye(2) / self.scale, offset=offset, order=1, mode="constant", cval=BACKGROUND))


@dataclasses.dataclass(frozen=True)
class Contrast(ImageFault):
    factor: float = 0.4
    name: ClassVar[str] = "contrast"

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 <= self.factor < 1.0:
            raise ValueError(f"factor must be in [0, 1). Found {self.factor}.")

    def transform_images(self, pixels, client_id):
        return BACKGROUND - self.factor * (BACKGROUND - pixels)


@dataclasses.dataclass(frozen=True)
class Gamma(ImageFault):
    gamma: float = 2.2
    name: ClassVar[str] = "gamma"

    def __post_init__(self):
        super().__post_init__()
        check_positive("gamma", self.gamma)
        if self.gamma == 1.0:
            raise ValueError("gamma: 1 would change nothing. Found 1.0.")

    def transform_images(self, pixels, client_id):
        return np.power(pixels, self.gamma)


@dataclasses.dataclass(frozen=True)
class NormalizeTwice(ImageFault):
    mean: float = 0.1307
    std: float = 0.3081
    name: ClassVar[str] = "normalize_twice"

    def __post_init__(self):
        super().__post_init__()
        check_in_range("mean", self.mean, 0.0, 1.0)
        check_positive("std", self.std)

    def transform_images(self, pixels, client_id):
        return (pixels - self.mean) / self.std


@dataclasses.dataclass(frozen=True)
class Noise(ImageFault):
    """Sensor or transmission noise, drawn per device from (seed, device): public randomness."""
    kind: str = "gaussian"
    amount: float = 0.2
    name: ClassVar[str] = "noise"

    def __post_init__(self):
        super().__post_init__()
        check_one_of("kind", self.kind, NOISE_KINDS)
        check_positive("amount", self.amount)
        if self.kind == "salt_pepper":
            check_in_range("amount", self.amount, 0.0, 1.0)

    def transform_images(self, pixels, client_id):
        rng = client_rng(self.seed, client_id, self.stream, rng_streams.FAULT_CONTENT)
        if self.kind == "gaussian":
            return pixels + rng.normal(0.0, self.amount, pixels.shape)
        hit = rng.random(pixels.shape) < self.amount
        return np.where(hit, rng.integers(0, 2, pixels.shape).astype(np.float32), pixels)


@dataclasses.dataclass(frozen=True)
class Jpeg(ImageFault):
    quality: int = 10
    name: ClassVar[str] = "jpeg"

    def __post_init__(self):
        super().__post_init__()
        check_in_range("quality", self.quality, 1, 95)

    def transform_images(self, pixels, client_id):
        def round_trip(image: np.ndarray) -> np.ndarray:
            buffer = io.BytesIO()
            Image.fromarray(np.round(image * 255.0).astype(np.uint8)).save(
                buffer, format="JPEG", quality=self.quality)
            buffer.seek(0)
            return np.asarray(Image.open(buffer), dtype=np.float32) / 255.0

        return _per_image(pixels, round_trip)


@dataclasses.dataclass(frozen=True)
class Threshold(ImageFault):
    level: float = 0.5
    name: ClassVar[str] = "threshold"

    def __post_init__(self):
        super().__post_init__()
        check_in_range("level", self.level, 0.0, 1.0)

    def transform_images(self, pixels, client_id):
        return (pixels >= self.level).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Erode(ImageFault):
    """Thinner strokes: each pixel the lightest of its (2·radius+1)² neighbourhood (ink is dark)."""
    radius: int = 1
    name: ClassVar[str] = "erode"

    def __post_init__(self):
        super().__post_init__()
        check_in_range("radius", self.radius, 1, 5)

    def transform_images(self, pixels, client_id):
        size = 2 * self.radius + 1
        return ndimage.grey_dilation(pixels, size=(1, size, size), mode="constant", cval=BACKGROUND)


@dataclasses.dataclass(frozen=True)
class Dilate(Erode):
    """Thicker strokes: each pixel the darkest of its (2·radius+1)² neighbourhood."""
    name: ClassVar[str] = "dilate"

    def transform_images(self, pixels, client_id):
        size = 2 * self.radius + 1
        return ndimage.grey_erosion(pixels, size=(1, size, size), mode="constant", cval=BACKGROUND)


@dataclasses.dataclass(frozen=True)
class Mark(ImageFault):
    """The same mark on every image, as dark as `darkness` below the background, never lighter than the ink
    already there (a pixel keeps the darker of the two)."""
    kind: str = "line"
    darkness: float = 0.5
    name: ClassVar[str] = "mark"

    def __post_init__(self):
        super().__post_init__()
        check_one_of("kind", self.kind, MARK_KINDS)
        check_in_range("darkness", self.darkness, 0.05, 1.0)

    def transform_images(self, pixels, client_id):
        mark = np.zeros(pixels.shape[1:], bool)
        if self.kind == "line":
            mark[21] = True
        elif self.kind == "frame":
            mark[[0, -1]] = True
            mark[:, [0, -1]] = True
        else:
            mark[22:26, 22:26] = True
        return np.where(mark, np.minimum(pixels, BACKGROUND - self.darkness), pixels)


IMAGE_FAULTS = {cls.name: cls for cls in (Rotate, RotateSmall, Mirror, Flip, Transpose, Blur, Rescale, Shift, Zoom,
                                          Contrast, Gamma, NormalizeTwice, Noise, Jpeg, Threshold, Erode, Dilate,
                                          Mark)}
