"""Export-only ExecuTorch targets: registered, probed honestly, and (Vulkan, Core ML) exporting for real here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness import backends
from harness.backends.base import BackendUnavailable, ExportRequest
from harness.execute.isolate import run_export

TARGETS = {
    "executorch-vulkan": "vulkan",
    "executorch-coreml": "coreml",
    "executorch-mps": "mps",
    "executorch-qnn": "qnn",
    "executorch-arm": "ethos-u",
}


@pytest.mark.parametrize(("name", "device"), TARGETS.items())
def test_registered_as_export_only(name, device):
    backend = backends.get(name)
    assert name in backends.names()
    assert backend.export_only is True
    assert backend.devices == (device,)
    assert backend.library == "executorch"
    with pytest.raises(BackendUnavailable, match=f"no runtime for {name} on this host; export only"):
        backend.load(Path("model.pte"), None, {})


def test_runtime_backends_are_not_export_only():
    assert backends.get("executorch-xnnpack").export_only is False
    assert backends.get("onnxruntime").export_only is False


def test_qnn_probe_without_sdk(monkeypatch):
    monkeypatch.delenv("QNN_SDK_ROOT", raising=False)
    backend = backends.get("executorch-qnn")
    assert backend.probe("qnn") == "QNN SDK not found (QNN_SDK_ROOT unset)"
    monkeypatch.setenv("QNN_SDK_ROOT", "/nonexistent/qnn")
    assert "is not a directory" in backend.probe("qnn")


def test_qnn_export_refuses_without_sdk(monkeypatch, tmp_path):
    # Without the SDK, executorch's QNN setup would try to download one: the export must stop first.
    monkeypatch.delenv("QNN_SDK_ROOT", raising=False)
    with pytest.raises(BackendUnavailable, match="QNN_SDK_ROOT unset"):
        backends.get("executorch-qnn").export(
            _request("executorch-qnn", "qnn", "fp16", "unused.pt", tmp_path)
        )


@pytest.mark.skipif(sys.platform == "darwin", reason="the Metal backend can export on macOS")
def test_mps_probe_says_why_not_here():
    reason = backends.get("executorch-mps").probe("mps")
    assert reason is not None and "macOS" in reason


def test_arm_probe_names_the_missing_tools():
    from harness.backends.executorch_arm import TOOLS, _importable

    reason = backends.get("executorch-arm").probe("ethos-u")
    missing = [m for m in TOOLS if not _importable(m)]
    if not missing:
        assert reason is None
    else:
        assert all(m in reason for m in missing), reason


def test_precisions_are_what_each_target_executes():
    assert backends.get("executorch-qnn").precisions == {"qnn": ("fp16",)}
    assert backends.get("executorch-arm").precisions == {"ethos-u": ("int8",)}
    assert "fp32" in backends.get("executorch-vulkan").precisions["vulkan"]


# -- real exports ------------------------------------------------------------------------------------------------


def _request(backend: str, device: str, precision: str, checkpoint: str, out: Path) -> ExportRequest:
    return ExportRequest(
        backend=backend,
        device=device,
        checkpoint=checkpoint,
        size="n",
        task="detect",
        head="raw",
        height=320,
        width=320,
        dynamic=False,
        batch=1,
        precision=precision,
        out_dir=str(out),
    )


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    from harness.yolo.models import ModelSource, materialize

    return str(materialize(ModelSource("n", "detect"), tmp_path_factory.mktemp("cache")).checkpoint)


def _export(name: str, checkpoint: str, tmp_path: Path):
    backend = backends.get(name)
    device = backend.devices[0]
    reason = backend.probe(device)
    if reason:
        pytest.skip(reason)
    req = _request(name, device, "fp32", checkpoint, tmp_path / name)
    outcome = run_export(req, tmp_path / f"{name}.log", timeout_s=900)
    assert outcome.status == "ok", (outcome.message, Path(outcome.log).read_text()[-3000:])
    assert Path(outcome.artifact).suffix == ".pte" and Path(outcome.artifact).stat().st_size > 0
    return outcome.info["ops"]


@pytest.mark.slow
@pytest.mark.export
def test_vulkan_export_delegates_the_raw_head(checkpoint, tmp_path):
    ops = _export("executorch-vulkan", checkpoint, tmp_path)
    assert ops["delegated"] > 0
    assert ops["fallback_ops"] == []  # every operator is delegated; FACTS: 661 of 662 nodes at 640
    assert ops["delegated_subgraphs"] >= 1


@pytest.mark.slow
@pytest.mark.export
def test_coreml_export_delegates_the_raw_head(checkpoint, tmp_path):
    ops = _export("executorch-coreml", checkpoint, tmp_path)
    assert ops["delegated"] > 0
    assert ops["fallback_ops"] == []  # FACTS: 542 of 543 nodes at 640
    assert ops["delegated_subgraphs"] >= 1


@pytest.mark.slow
@pytest.mark.export
def test_arm_export_with_the_toolchain(checkpoint, tmp_path):
    """Runs where tosa-tools and ethos-u-vela are installed (executorch's `ethos-u` extra); skips elsewhere.

    With executorch 1.5.1 the int8 quantizer rejects the anchors' `new_full` of the raw head (checked with
    tosa-tools 2026.5.0 and ethos-u-vela 5.1.0): the failure must be diagnosed, not unknown.
    """
    from harness.diagnosis import classify

    backend = backends.get("executorch-arm")
    reason = backend.probe("ethos-u")
    if reason:
        pytest.skip(reason)
    req = _request("executorch-arm", "ethos-u", "int8", checkpoint, tmp_path / "arm")
    outcome = run_export(req, tmp_path / "arm.log", timeout_s=1500)
    if outcome.status == "ok":
        assert outcome.info["ops"]["delegated"] > 0
    else:
        failure = classify(
            outcome.message,
            outcome.traceback,
            outcome.exception_type,
            signal=outcome.signal,
            status=outcome.status,
        )
        assert failure["class"] == "unsupported_op", failure
        assert failure["ops"] == ["new_full"]
