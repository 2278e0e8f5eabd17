"""The labels of the segmentation, pose and oriented-box tasks, derived from the generated shapes.

Every label comes from what was drawn (harness.yolo.dataset: each object's class, drawing parameters and mask), so
the ground truth is known exactly:

- **segment**: the polygon of the object's *visible* pixels (what a later object leaves uncovered, as COCO's masks
  are), traced with OpenCV's `findContours` (outer contours and holes, at pixel centres); a ring, an outlined shape
  or an object cut in two by a later one has several contours, joined into one polygon by ultralytics' own
  `merge_multi_segment` (what its COCO converter does), which `cv2.fillPoly` fills back with the holes open.
- **pose**: COCO's 17 keypoint slots (kpt_shape [17, 3]), filled with points the shape defines. Slot 0 ("nose")
  is the shape's centre. Slots 1-16 are eight mirror pairs of rays from the centre at fixed image angles
  (`RAY_DEGREES`, y down, 11.25 + 22.5 k degrees; none vertical): each keypoint is where its ray leaves the shape's
  outline (the circle, the ring's outer circle, the square's or triangle's polygon, the cross's two bars). The odd
  slot of a pair (COCO's left_*) holds the ray pointing to the image's right, the even slot its mirror image to the
  left, the pairs ordered from the top (slots 1, 2: nearly straight up) round to the bottom (15, 16: nearly straight
  down), like a person's keypoints from eyes to ankles. A horizontal flip maps each ray onto its pair's other ray,
  so COCO's own flip_idx (`FLIP_IDX`) is right for ultralytics' flip augmentation. Visibility: 2 where the point is
  not covered by a later object, 1 where it is (labelled, not visible; COCO's flags); never 0.
- **obb**: the object's rotated rectangle, at the orientation the shape defines (a square's sides, a cross's arms,
  the most nearly horizontal side of a triangle; 0 for circles and rings, whose rectangle is a square at any angle),
  spanning the exact extent of the object's full mask in that frame (every pixel's four corners): at angle 0 it is
  the detect label's box. Written as ultralytics' OBB rows: class and the four corners, normalised.
"""

from __future__ import annotations

import numpy as np

from harness.yolo.dataset import CLASSES, Obj

#: the ray angles of keypoint slots 1..16 (degrees, image axes: x right, y down), as (slot 2p+1, slot 2p+2) pairs
RAY_DEGREES = (
    (281.25, 258.75),
    (303.75, 236.25),
    (326.25, 213.75),
    (348.75, 191.25),
    (11.25, 168.75),
    (33.75, 146.25),
    (56.25, 123.75),
    (78.75, 101.25),
)
KPT_SHAPE = (17, 3)
#: COCO's flip_idx: the slot each keypoint moves to under a horizontal flip (the mirror ray)
FLIP_IDX = (0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15)
VISIBLE, COVERED = 2.0, 1.0


def _slot_angles() -> np.ndarray:
    out = np.zeros(16)
    for p, (right, left) in enumerate(RAY_DEGREES):
        out[2 * p], out[2 * p + 1] = right, left
    return np.deg2rad(out)


SLOT_ANGLES = _slot_angles()  # slots 1..16


def _polygon(center: np.ndarray, radius: float, sides: int, angle: float) -> np.ndarray:
    """The vertices the generator drew (harness.yolo.dataset._polygon, rounded to pixels), as floats."""
    t = angle + np.arange(sides) * 2 * np.pi / sides
    return np.round(center + radius * np.stack([np.cos(t), np.sin(t)], 1)).astype(np.float64)


def _cross_bars(o: Obj) -> list[np.ndarray]:
    c, r = np.asarray(o.center, np.float64), o.extent / 2
    arm = max(3, round(o.extent / 4))
    bars = []
    for a in (o.angle, o.angle + np.pi / 2):
        d, n = np.array([np.cos(a), np.sin(a)]), np.array([-np.sin(a), np.cos(a)])
        corners = [c + sx * r * d + sy * arm / 2 * n for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        bars.append(np.round(np.array(corners)))
    return bars


def _exit_distance(origin: np.ndarray, direction: np.ndarray, poly: np.ndarray) -> float:
    """How far a ray from `origin` (inside the convex polygon `poly`) runs before it leaves the polygon."""
    best = np.inf
    for a, b in zip(poly, np.roll(poly, -1, axis=0), strict=True):
        e = b - a
        denom = direction[0] * (-e[1]) - direction[1] * (-e[0])
        if abs(denom) < 1e-12:
            continue
        rhs = a - origin
        t = (rhs[0] * (-e[1]) - rhs[1] * (-e[0])) / denom
        s = (direction[0] * rhs[1] - direction[1] * rhs[0]) / denom
        if t > 1e-9 and -1e-9 <= s <= 1 + 1e-9:
            best = min(best, t)
    return float(best) if np.isfinite(best) else 0.0


def _outline_distance(o: Obj, direction: np.ndarray) -> float:
    """Distance from the shape's centre to its outline along `direction`."""
    name, r = CLASSES[o.cls], o.extent / 2
    if name == "circle":
        return float(round(r))
    if name == "ring":
        rt = max(3, round(r / 4))
        return float(round(r - rt / 2)) + rt / 2
    c = np.asarray(o.center, np.float64)
    if name in ("square", "triangle"):
        poly = _polygon(c, r, 4 if name == "square" else 3, o.angle)
        return _exit_distance(c, direction, poly)
    if name == "cross":
        return max(_exit_distance(c, direction, bar) for bar in _cross_bars(o))
    raise ValueError(f"unknown class {o.cls}")  # pragma: no cover - CLASSES and this function change together


def keypoints(o: Obj, later: list[np.ndarray], h: int, w: int) -> np.ndarray:
    """The object's 17 keypoints (x, y, visibility) in pixels; `later` the masks drawn after it."""
    name = CLASSES[o.cls]
    c = np.asarray(o.center, np.float64)
    if name in ("circle", "ring"):
        c = np.round(c)  # cv2.circle draws at the rounded centre
    pts = np.zeros((17, 3))
    pts[0, :2] = c
    for k, a in enumerate(SLOT_ANGLES):
        d = np.array([np.cos(a), np.sin(a)])
        pts[k + 1, :2] = c + _outline_distance(o, d) * d
    pts[:, 0] = np.clip(pts[:, 0], 0, w - 1e-3)
    pts[:, 1] = np.clip(pts[:, 1], 0, h - 1e-3)
    for k in range(17):
        x, y = int(pts[k, 0]), int(pts[k, 1])
        pts[k, 2] = COVERED if any(m[y, x] for m in later) else VISIBLE
    return pts


def obb_angle(o: Obj) -> float:
    """The orientation (radians) of the object's rotated rectangle, as the module docstring says."""
    name = CLASSES[o.cls]
    if name == "square":
        return o.angle + np.pi / 4  # vertices at angle + k 90 degrees: the sides run at 45 degrees to them
    if name == "cross":
        return o.angle
    if name == "triangle":
        poly = _polygon(np.asarray(o.center, np.float64), o.extent / 2, 3, o.angle)
        sides = np.roll(poly, -1, axis=0) - poly
        dirs = np.arctan2(sides[:, 1], sides[:, 0])
        return float(dirs[int(np.argmin(np.abs(np.sin(dirs))))])
    return 0.0


def rotated_rect(o: Obj, mask: np.ndarray) -> np.ndarray:
    """The four corners (4, 2) of the rectangle at `obb_angle(o)` that spans every pixel of `mask`. Where it
    reaches past the image (a triangle near an edge: its rectangle's corners lie beyond its apex), the rectangle of
    least area around its part inside the image (cv2.minAreaRect, as ultralytics reads OBB corners) instead."""
    import cv2

    h, w = mask.shape
    phi = obb_angle(o)
    u, v = np.array([np.cos(phi), np.sin(phi)]), np.array([-np.sin(phi), np.cos(phi)])
    ys, xs = np.nonzero(mask)
    corners = np.concatenate(
        [np.stack([xs + dx, ys + dy], 1) for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1))]
    ).astype(np.float64)
    pu, pv = corners @ u, corners @ v
    u0, u1, v0, v1 = pu.min(), pu.max(), pv.min(), pv.max()
    rect = np.array([u0 * u + v0 * v, u1 * u + v0 * v, u1 * u + v1 * v, u0 * u + v1 * v])
    if rect.min() >= 0 and (rect[:, 0] <= w).all() and (rect[:, 1] <= h).all():
        return rect
    inside = _clip(rect, w, h)
    return cv2.boxPoints(cv2.minAreaRect(inside.astype(np.float32))).astype(np.float64)


def _clip(poly: np.ndarray, w: int, h: int) -> np.ndarray:
    """A convex polygon cut to the image rectangle [0, w] x [0, h] (Sutherland-Hodgman)."""
    out = [np.asarray(p, np.float64) for p in poly]
    for axis, bound, keep_below in (
        (0, 0.0, False),
        (0, float(w), True),
        (1, 0.0, False),
        (1, float(h), True),
    ):
        pts, out = out, []
        for i, cur in enumerate(pts):
            prev = pts[i - 1]
            cur_in = cur[axis] <= bound if keep_below else cur[axis] >= bound
            prev_in = prev[axis] <= bound if keep_below else prev[axis] >= bound
            if cur_in != prev_in:
                t = (bound - prev[axis]) / (cur[axis] - prev[axis])
                out.append(prev + t * (cur - prev))
            if cur_in:
                out.append(cur)
    return np.array(out)


def polygon(visible: np.ndarray) -> np.ndarray:
    """One polygon (n, 2) in pixel coordinates for a visible mask: its contours at pixel centres, joined by
    ultralytics' merge_multi_segment where there are several."""
    import cv2
    from ultralytics.data.converter import merge_multi_segment

    contours, _ = cv2.findContours(visible.astype(np.uint8), cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
    segments = [c.reshape(-1, 2).astype(np.float64) + 0.5 for c in contours if len(c) >= 3]
    if not segments:  # a sliver of one or two pixels: its pixels' centres
        ys, xs = np.nonzero(visible)
        return np.stack([xs, ys], 1).astype(np.float64) + 0.5
    if len(segments) == 1:
        return segments[0]
    merged = merge_multi_segment([s.reshape(-1).tolist() for s in segments])
    return np.concatenate([np.asarray(m, np.float64).reshape(-1, 2) for m in merged], 0)


def _norm(points: np.ndarray, w: int, h: int) -> str:
    p = np.asarray(points, np.float64).reshape(-1, 2) / np.array([w, h])
    return " ".join(f"{x:.6f} {y:.6f}" for x, y in np.clip(p, 0.0, 1.0))


def seg_lines(objs: list[Obj], masks: list[np.ndarray], w: int, h: int) -> list[str]:
    """ultralytics' segment rows: class, then the visible polygon's points normalised."""
    from harness.yolo.dataset import visible_masks

    return [
        f"{o.cls} {_norm(polygon(v), w, h)}"
        for o, v in zip(objs, visible_masks(masks), strict=True)
        if v.any()
    ]


def pose_lines(objs: list[Obj], masks: list[np.ndarray], w: int, h: int) -> list[str]:
    """ultralytics' pose rows: class, box (as detect's), then 17 keypoints x y v (x, y normalised)."""
    rows = []
    for i, o in enumerate(objs):
        x0, y0, x1, y1 = o.box
        box = f"{(x0 + x1) / 2 / w:.6f} {(y0 + y1) / 2 / h:.6f} {(x1 - x0) / w:.6f} {(y1 - y0) / h:.6f}"
        k = keypoints(o, masks[i + 1 :], h, w)
        kp = " ".join(f"{x / w:.6f} {y / h:.6f} {int(v)}" for x, y, v in k)
        rows.append(f"{o.cls} {box} {kp}")
    return rows


def obb_lines(objs: list[Obj], masks: list[np.ndarray], w: int, h: int) -> list[str]:
    """ultralytics' OBB rows: class, then the rotated rectangle's four corners normalised."""
    return [f"{o.cls} {_norm(rotated_rect(o, m), w, h)}" for o, m in zip(objs, masks, strict=True)]
