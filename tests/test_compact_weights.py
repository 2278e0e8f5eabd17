"""Compact weights round trip: a checkpoint stored int8 per output channel decodes to the same ultralytics model (the
state dict's keys exactly, every weight within one quantization step of its channel, the rest bit for bit, the
attributes ultralytics reads), from a file that loads with weights_only=True; and an encoding that would not come
back so is refused before anything is written."""

from __future__ import annotations

import pytest

from harness.yolo import compact_weights as cw

#: a small YOLO26-style detection model (strides 8, 16, 32; end-to-end head): 216k parameters, built in milliseconds
TINY = {
    "nc": 3,
    "end2end": True,
    "reg_max": 1,
    "backbone": [
        [-1, 1, "Conv", [8, 3, 2]],
        [-1, 1, "Conv", [16, 3, 2]],
        [-1, 1, "Conv", [32, 3, 2]],
        [-1, 1, "Conv", [32, 3, 2]],
        [-1, 1, "Conv", [64, 3, 2]],
    ],
    "head": [[[2, 3, 4], 1, "Detect", ["nc"]]],
}
ZERO_CHANNEL = "model.4.conv.weight"


@pytest.fixture
def checkpoint(tmp_path):
    """A checkpoint of TINY as ultralytics' strip_optimizer leaves one (fp16, eval, no gradients), its weights random
    at several scales per channel, one channel all zero, with the attributes a trained model carries."""
    import torch
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(0)
    model = DetectionModel(TINY, verbose=False)
    with torch.no_grad():
        for p in model.parameters():
            scale = torch.logspace(-3, 0, p.shape[0]).view(-1, *[1] * (p.dim() - 1))
            p.copy_(torch.randn_like(p) * scale)
        model.state_dict()[ZERO_CHANNEL][5].zero_()
    model.names = {0: "circle", 1: "ring", 2: "square"}
    model.args = {"task": "detect", "imgsz": 64, "data": "synthetic"}
    model.end2end = (
        False  # as ultralytics' validator leaves a trained model: the head's choice in a private attribute
    )
    model.half().eval()
    for p in model.parameters():
        p.requires_grad = False
    path = tmp_path / "tiny.pt"
    torch.save({"model": model, "train_args": {"task": "detect", "imgsz": 64}, "epoch": -1}, path)
    return path, model


def test_decode_of_encode_gives_the_model_back_within_one_step(checkpoint, tmp_path):
    import torch
    from ultralytics.nn.tasks import torch_safe_load

    from harness.yolo.models import check_checkpoint, load_yolo

    path, model = checkpoint
    compact = tmp_path / "tiny.compact.pt"
    summary = cw.encode(path, compact)
    assert summary["bytes_after"] < 0.6 * summary["bytes_before"], summary
    assert summary["int8_tensors"] > 0 and summary["kept_tensors"] > 0 and summary["max_error_steps"] <= 0.5
    # plain tensors, dicts and strings: nothing in the file names a class to unpickle
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(compact)) == []
    archive = cw.read(compact)
    out = cw.decode(compact, tmp_path / "decoded.pt")
    check_checkpoint(out, allow_unsafe=False)
    back = torch_safe_load(str(out), safe_only=True)[0]["model"]  # as saved (YOLO() would make it fp32)
    before, after = model.state_dict(), back.state_dict()
    assert list(after) == list(before)  # the keys exactly, in order
    for k, t in before.items():
        u = after[k]
        assert (u.shape, u.dtype) == (t.shape, t.dtype), k
        if k in archive["int8"]:
            step = archive["scale"][k].float().view(-1, *[1] * (t.dim() - 1))
            assert bool(((u.float() - t.float()).abs() <= step).all()), k
        else:
            assert torch.equal(u, t), k  # BatchNorm, biases, small tensors: as stored
    assert not after[ZERO_CHANNEL][
        5
    ].any()  # an all-zero channel stays zero (its scale is no division by zero)
    assert set(archive["int8"]) == {
        k for k, t in before.items() if t.dim() >= 2 and t.numel() >= cw.MIN_QUANTIZED
    }
    assert cw.attribute_differences(model, back) == []
    assert back.names == model.names and back.args == model.args and torch.equal(back.stride, model.stride)
    yolo = load_yolo(out)
    assert yolo.task == "detect" and yolo.names == model.names
    assert back.model[-1]._end2end is False and back.end2end == model.end2end
    # the decoded model runs like the original: its outputs off by what the int8 rounding of the weights makes
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref, got = model.float()(x), back.float()(x)
    ref, got = (ref[0], got[0]) if isinstance(ref, tuple) else (ref, got)
    assert ref.shape == got.shape
    err = float((ref - got).abs().max() / ref.abs().max())
    print(f"largest output difference {err:.4f} of the largest output")
    assert err < 0.05, err


def test_the_attribute_check_sees_a_difference(checkpoint, tmp_path):
    """The other way for the comparison encode relies on: a class name or an argument that did not come back."""
    path, model = checkpoint
    back, _ = cw.rebuild(_encoded(path, tmp_path))
    back.names = {0: "circle", 1: "ring", 2: "triangle"}
    back.model[-1].nc = 4
    assert cw.attribute_differences(model, back) == ["<model>.names", "model.5.nc"]


def test_an_encoding_that_would_not_come_back_is_refused_and_leaves_the_file_as_it_was(
    checkpoint, tmp_path, monkeypatch
):
    from harness.yolo.models import sha256_file

    path, _ = checkpoint
    compact = tmp_path / "tiny.compact.pt"
    cw.encode(path, compact)  # with the real decoding it is written
    written = sha256_file(compact)
    real = cw.dequantize
    monkeypatch.setattr(
        cw, "dequantize", lambda q, s: real(q, s) + 2 * s.float().view(-1, *[1] * (q.dim() - 1))
    )
    with pytest.raises(cw.CompactWeightsError, match="does not come back from its compact form"):
        cw.encode(path, compact)
    assert sha256_file(compact) == written  # the earlier file stays, no temp file is left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.compact.pt", "tiny.pt"]
    with pytest.raises(cw.CompactWeightsError):
        cw.encode(path, tmp_path / "other.compact.pt")
    assert not (tmp_path / "other.compact.pt").exists()


def test_the_same_weights_give_the_same_bytes(checkpoint, tmp_path):
    """The committed file is reproducible: its json's command writes the same sha256."""
    from harness.yolo.models import sha256_file

    path, _ = checkpoint
    a, b = tmp_path / "a" / "x.compact.pt", tmp_path / "b" / "y.compact.pt"
    a.parent.mkdir()
    b.parent.mkdir()
    cw.encode(path, a)
    cw.encode(path, b)
    assert sha256_file(a) == sha256_file(b)


def _encoded(path, tmp_path):
    compact = tmp_path / "tiny.compact.pt"
    cw.encode(path, compact)
    return compact
