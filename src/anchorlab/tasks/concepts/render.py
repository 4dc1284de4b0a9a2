"""Procedural renders of the concept-graph shapes (Okawa et al., NeurIPS 2023; journal §VII, Fig. 6).

A node of the concept cube is three bits written ``"<shape><size><color>"``:

======  ==========  ==========
bit     0           1
======  ==========  ==========
shape   circle      triangle
size    large       small
color   red         blue
======  ==========  ==========

so ``"010"`` is a small red circle (the journal's reading) and ``"011"`` a
small blue circle; the training nodes 000, 100, 001, 111 are a large red
circle, a large red triangle, a large blue circle and a small blue triangle
(docs/choices.md, "concept-graph bit order").

An image is one shape on a black background (the value 0 of every channel, as
the authors' transparent PNG renders read through ``ToTensor``), values in
[0, 1], drawn with 4x4 super-sampling so edges are anti-aliased. Each render
jitters the centre (``position_jitter``, a fraction of the side), the size
(a factor in ``1 +- size_jitter``) and the shade (each RGB channel
``+- shade_jitter``). The size is the circle's radius; a triangle (equilateral,
apex up) has the same area, and its bounding box is centred like the circle's.
Everything is a function of the numpy generator passed in.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

BITS = ("shape", "size", "color")
VALUES = {"shape": ("circle", "triangle"), "size": ("large", "small"), "color": ("red", "blue")}
NODES = tuple("".join(b) for b in itertools.product("01", repeat=3))   # "000" ... "111"
COLORS = np.array([[0.9, 0.1, 0.1], [0.1, 0.1, 0.9]], dtype=np.float32)   # red, blue (the authors' test colours)
LARGE = 0.28                      # radius of a large shape, a fraction of the image side
SMALL_RATIO = 1.6 / 2.6           # the authors' small / large Blender sizes
TRIANGLE_R = math.sqrt(math.pi / (3 * math.sqrt(3) / 4))   # circumradius / radius for equal area
SUPERSAMPLE = 4


def node_bits(node: str) -> tuple[int, int, int]:
    """``"010"`` -> (shape, size, color) = (0, 1, 0)."""
    if len(node) != 3 or set(node) - {"0", "1"}:
        raise ValueError(f"a node is three bits like '010', got {node!r}")
    return tuple(int(c) for c in node)   # type: ignore[return-value]


def describe(node: str) -> str:
    """``"010"`` -> ``"small red circle"``."""
    shape, size, color = node_bits(node)
    return f"{VALUES['size'][size]} {VALUES['color'][color]} {VALUES['shape'][shape]}"


@dataclass(frozen=True)
class Jitter:
    """Random variation of a render: centre +- ``position`` (fraction of the side), size factor 1 +- ``size``,
    each colour channel +- ``shade``."""

    position: float = 0.06
    size: float = 0.05
    shade: float = 0.08


@dataclass
class Renders:
    """``images`` (N, 3, H, W) float32 in [0, 1]; ``bits`` (N, 3) int64 (shape, size, color);
    ``rgb`` (N, 3) the drawn colour; ``radius`` (N,) the drawn size as a fraction of the side."""

    images: np.ndarray
    bits: np.ndarray
    rgb: np.ndarray
    radius: np.ndarray


def canonical_radius(size_bit: int | np.ndarray) -> np.ndarray:
    """The un-jittered radius of a size bit (fraction of the side)."""
    return np.where(np.asarray(size_bit) == 1, LARGE * SMALL_RATIO, LARGE).astype(np.float32)


def _masks(shape: np.ndarray, cx: np.ndarray, cy: np.ndarray, r: np.ndarray, side: int) -> np.ndarray:
    """(N, side, side) coverage in [0, 1] of each shape, by super-sampling."""
    n = side * SUPERSAMPLE
    g = (np.arange(n, dtype=np.float32) + 0.5) / n
    x, y = g[None, None, :], g[None, :, None]
    cx, cy, r = cx[:, None, None], cy[:, None, None], r[:, None, None]
    circle = (x - cx) ** 2 + (y - cy) ** 2 <= r ** 2
    R = TRIANGLE_R * r
    ty = cy + R / 4                     # centroid, so the bounding box (apex -R, base +R/2) is centred at cy
    dx, dy = x - cx, y - ty             # image y points down; the apex is at dy = -R
    inside = dy <= R / 2                # base edge
    for a in (math.radians(30), math.radians(150)):   # the two slanted edges' outward normals (x, -y up)
        inside = inside & (dx * math.cos(a) - dy * math.sin(a) <= R / 2)
    tri = shape[:, None, None] == 1
    hit = np.where(tri, inside, circle).astype(np.float32)
    return hit.reshape(-1, side, SUPERSAMPLE, side, SUPERSAMPLE).mean(axis=(2, 4))


def render(bits: np.ndarray, side: int, rng: np.random.Generator, jitter: Jitter = Jitter(),
           chunk: int = 256) -> Renders:
    """Render one image per row of ``bits`` ((N, 3) ints: shape, size, color) at ``side`` x ``side``."""
    bits = np.asarray(bits, dtype=np.int64).reshape(-1, 3)
    N = len(bits)
    cx = 0.5 + rng.uniform(-jitter.position, jitter.position, N).astype(np.float32)
    cy = 0.5 + rng.uniform(-jitter.position, jitter.position, N).astype(np.float32)
    radius = canonical_radius(bits[:, 1]) * (1 + rng.uniform(-jitter.size, jitter.size, N)).astype(np.float32)
    rgb = np.clip(COLORS[bits[:, 2]] + rng.uniform(-jitter.shade, jitter.shade, (N, 3)), 0, 1).astype(np.float32)
    images = np.empty((N, 3, side, side), dtype=np.float32)
    for s in range(0, N, chunk):
        sl = slice(s, s + chunk)
        cover = _masks(bits[sl, 0], cx[sl], cy[sl], radius[sl], side)
        images[sl] = cover[:, None] * rgb[sl, :, None, None]
    return Renders(images, bits, rgb, radius.astype(np.float32))


def render_nodes(nodes: tuple[str, ...] | list[str], per_node: int, side: int, seed: int | list[int],
                 jitter: Jitter = Jitter()) -> Renders:
    """``per_node`` renders of each node, node by node, from ``np.random.default_rng(seed)`` (an int or a
    list of ints: one stream of a seed)."""
    bits = np.repeat(np.array([node_bits(n) for n in nodes], dtype=np.int64), per_node, axis=0)
    return render(bits, side, np.random.default_rng(seed), jitter)


def node_of(bits: np.ndarray) -> list[str]:
    """(N, 3) bits -> node strings."""
    return ["".join(str(int(b)) for b in row) for row in np.asarray(bits).reshape(-1, 3)]
