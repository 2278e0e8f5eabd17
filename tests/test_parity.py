import numpy as np

from harness.measure.parity import compare


def _dets(n=300, seed=0):
    rng = np.random.default_rng(seed)
    boxes = rng.uniform(0, 320, (1, n, 4))
    scores = np.sort(rng.uniform(0.001, 0.9, (1, n, 1)), axis=1)[:, ::-1]
    cls = rng.integers(0, 80, (1, n, 1)).astype(float)
    return np.concatenate([boxes, scores, cls], axis=-1).astype(np.float32)


def test_e2e_rows_reordered_by_topk_ties_still_agree():
    ref = _dets()
    out = ref[:, np.random.default_rng(1).permutation(300)]
    p = compare([out], [ref], "e2e", "fp32")
    assert p.ok and p.max_abs == 0.0 and "matched" in p.compared


def test_e2e_perturbation_beyond_tolerance_fails():
    ref = _dets()
    out = ref.copy()
    out[..., :4] += 5.0  # every box off by 5 px
    p = compare([out], [ref], "e2e", "fp32")
    assert not p.ok and p.rel_l2 > 1e-3


def test_raw_is_elementwise_and_order_sensitive():
    ref = np.random.default_rng(0).normal(size=(1, 84, 100)).astype(np.float32)
    assert compare([ref + 1e-6], [ref], "raw", "fp32").ok
    assert not compare([ref[:, :, ::-1]], [ref], "raw", "fp32").ok


def test_shape_mismatch_and_nan_are_failures():
    ref = np.zeros((1, 84, 100), np.float32) + 1
    assert not compare([np.zeros((1, 84, 99))], [ref], "raw", "fp32").ok
    bad = ref.copy()
    bad[0, 0, 0] = np.nan
    assert not compare([bad], [ref], "raw", "fp32").ok


def test_fp16_tolerance_is_looser_than_fp32():
    ref = np.random.default_rng(0).normal(size=(1000,)).astype(np.float32) + 3
    out = ref * (1 + 5e-3)
    assert not compare([out], [ref], "raw", "fp32").ok
    assert compare([out], [ref], "raw", "fp16").ok
