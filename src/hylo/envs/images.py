"""Camera frames as policies expect them: resized with padding, keeping the aspect ratio."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image


def resize_with_pad(image: np.ndarray[Any, Any], height: int, width: int) -> np.ndarray[Any, Any]:
    """An HWC frame resized to fit `height` × `width` with its aspect ratio kept (bilinear), centred on black, as
    uint8: what openpi-client's `image_tools.resize_with_pad` and `convert_to_uint8` make of it (the resize of
    `tf.image.resize_with_pad`). A frame of that size already is returned as is."""
    if image.ndim != 3 or image.shape[2] not in (1, 3, 4):
        raise ValueError(f"expected an HWC image with 1, 3 or 4 channels, got shape {image.shape}")
    if image.dtype != np.uint8:
        if np.issubdtype(image.dtype, np.floating):  # openpi's convert_to_uint8: floats are in [0, 1]
            image = (255 * image).astype(np.uint8)
        else:
            raise ValueError(f"expected a uint8 or float image, got dtype {image.dtype}")
    if image.shape[:2] == (height, width):
        return image
    frame = Image.fromarray(image[..., 0] if image.shape[2] == 1 else image)
    ratio = max(frame.width / width, frame.height / height)
    resized = frame.resize((int(frame.width / ratio), int(frame.height / ratio)), resample=Image.Resampling.BILINEAR)
    canvas = Image.new(resized.mode, (width, height), 0)
    canvas.paste(resized, (max(0, (width - resized.width) // 2), max(0, (height - resized.height) // 2)))
    out = np.asarray(canvas)
    return out[..., None] if out.ndim == 2 else out
