"""Dynamic height/width: the export-time range and the shape sweep run on one dynamic artifact."""

from __future__ import annotations

DEFAULT_RANGE = (320, 1280)
SWEEP = (320, 480, 640, 960, 1280, 650)


def dynamic_shapes_spec(options: dict):
    """torch.export dynamic_shapes for the image input: free H/W over the range, or `32*Dim` (the remedy)."""
    from torch.export import Dim

    lo, hi = options.get("dynamic_range", DEFAULT_RANGE)
    if options.get("multiple_of_32"):
        h = 32 * Dim("h32", min=max(1, lo // 32), max=hi // 32)
        w = h if options.get("square") else 32 * Dim("w32", min=max(1, lo // 32), max=hi // 32)
    else:
        h = Dim("height", min=lo, max=hi)
        w = Dim("width", min=lo, max=hi)
    return ({2: h, 3: w},)
