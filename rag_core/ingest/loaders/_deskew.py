"""Straightening a photographed or scanned page whose lines of text are tilted by a few degrees (loaders.image).

Tesseract reads lines tilted by up to about 4 degrees as well as straight ones and loses words past that: on photos of
a page (150-200 dpi, noise, uneven light; `tests/fixtures/documents/make_images.py measure`) it read 88-95% of the
words at 5 degrees, 78-93% at 6 and 79-80% at 7, and 94-100% of them at every tilt once levelled here (97-100% at 0
to 4 degrees either way). The tilt is found by projection profiles:
the dark pixels of a small copy of the page are projected onto the vertical at each candidate angle, and the angle
whose projection has the sharpest peaks (lines of text and the white gaps between them) wins.
"""
from __future__ import annotations

import logging

import numpy as np
from PIL import Image, ImageStat

log = logging.getLogger(__name__)

#: Tilts searched, either way, in degrees: beyond this a page is turned, not tilted, and left to the reader.
MAX_SKEW_DEG = 10.0
#: Tilts smaller than this are left alone: Tesseract reads them as well as straight lines, and turning blurs.
MIN_SKEW_DEG = 1.0
_SAMPLE_SIDE = 1200  # the longer side of the copy measured, in pixels
_MAX_POINTS = 200_000  # dark pixels projected at each angle
_MIN_POINTS = 500  # fewer dark pixels than this: no text to measure
_MIN_CONTRAST = 40  # grey levels between the page and its ink
_MIN_GAIN = 1.1  # the best angle's profile must be this much sharper than the upright one's


def skew_angle(picture: Image.Image) -> float:
    """The angle (degrees, counter-clockwise) that `picture` must be turned by for its lines to be level; 0.0 when
    there is no clear tilt, or no text to tell."""
    grey = picture.convert("L")
    scale = min(1.0, _SAMPLE_SIDE / max(grey.size))
    if scale < 1:
        grey = grey.resize((max(1, round(grey.width * scale)), max(1, round(grey.height * scale))),
                           Image.Resampling.BOX)
    pixels = np.asarray(grey, dtype=np.int16)
    page, ink = np.percentile(pixels, 50), np.percentile(pixels, 2)
    if page - ink < _MIN_CONTRAST:
        return 0.0
    ys, xs = np.nonzero(pixels < (page + ink) / 2)
    if len(xs) < _MIN_POINTS:
        return 0.0
    if len(xs) > _MAX_POINTS:
        keep = np.random.default_rng(0).choice(len(xs), _MAX_POINTS, replace=False)
        xs, ys = xs[keep], ys[keep]
    x, y = xs.astype(np.float64), ys.astype(np.float64)

    def sharpness(degrees: float) -> float:
        theta = np.deg2rad(degrees)
        rows = y * np.cos(theta) - x * np.sin(theta)
        counts = np.bincount((rows - rows.min()).astype(np.int64)).astype(np.float64)
        return float((counts * counts).sum())

    coarse = np.arange(-MAX_SKEW_DEG, MAX_SKEW_DEG + 1e-9, 0.5)
    best = float(coarse[int(np.argmax([sharpness(d) for d in coarse]))])
    fine = np.arange(best - 0.5, best + 0.5 + 1e-9, 0.05)
    scores = [sharpness(d) for d in fine]
    best = float(fine[int(np.argmax(scores))])
    if max(scores) < _MIN_GAIN * sharpness(0.0):
        return 0.0
    return round(best, 2)


def deskew(picture: Image.Image) -> Image.Image:
    """`picture` turned so its lines of text are level (grown to keep its corners, the new edges the colour of the
    page), or as it is when it is not tilted by MIN_SKEW_DEG or more."""
    angle = skew_angle(picture)
    if abs(angle) < MIN_SKEW_DEG:
        return picture
    log.debug("turning a page by %.2f degrees to level its lines", angle)
    # The page's own colour, not white: a white frame around a grey photographed page made Tesseract take the whole
    # page for ink (21% of the words read instead of 100% on the 5-degree photo).
    median = [int(v) for v in ImageStat.Stat(picture).median]
    page = median[0] if picture.mode == "L" else tuple(median[:3])
    return picture.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=page)
