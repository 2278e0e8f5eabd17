"""The backend registry finds its modules: a backend is its module in harness/backends/ (and its test), nothing else.

The expected orders were read from the registry before discovery replaced its hand-kept module list (ec02d03):
discovery must register the same backends, listed in the same order.
"""

from __future__ import annotations

import sys

import pytest

from harness import backends

#: `backends.names()` at ec02d03 (the module list's import order)
NAMES_BEFORE = (
    "torch-eager",
    "onnxruntime",
    "openvino",
    "executorch-xnnpack",
    "torch-compile",
    "torch-compile-max-autotune",
    "aoti",
    "tensorrt",
    "onnxruntime-trt",
    "executorch-cuda",
    "torch-eager-cudagraph",
    "aoti-cudagraph",
    "executorch-vulkan",
    "executorch-coreml",
    "executorch-mps",
    "executorch-qnn",
    "executorch-arm",
)
#: `backends.display_order()` at ec02d03
DISPLAY_BEFORE = (
    "torch-eager",
    "torch-eager-cudagraph",
    "torch-compile",
    "torch-compile-max-autotune",
    "onnxruntime",
    "openvino",
    "executorch-xnnpack",
    "aoti",
    "aoti-cudagraph",
    "tensorrt",
    "onnxruntime-trt",
    "executorch-cuda",
    "executorch-vulkan",
    "executorch-coreml",
    "executorch-mps",
    "executorch-qnn",
    "executorch-arm",
)

NEW_BACKEND = """
from pathlib import Path

from harness.backends import register
from harness.backends.base import Backend, Runner


@register
class Dropped(Backend):
    name = "{name}"

    def probe(self, device: str) -> str | None:
        return None

    def load(self, artifact: Path, cell, export_info: dict) -> Runner:
        raise NotImplementedError
"""


def test_same_backends_in_the_same_orders():
    assert backends.names() == NAMES_BEFORE
    assert backends.display_order() == DISPLAY_BEFORE
    assert backends.export_only_names() == (
        "executorch-vulkan",
        "executorch-coreml",
        "executorch-mps",
        "executorch-qnn",
        "executorch-arm",
    )


def test_helpers_and_base_are_not_backend_modules():
    mods = backends.backend_modules()
    assert "harness.backends.torch_eager" in mods
    assert "harness.backends.base" not in mods
    assert not any(m.rsplit(".", 1)[1].startswith("_") for m in mods)


@pytest.fixture
def scratch_registry(tmp_path, monkeypatch):
    """The registry with `tmp_path` as one more directory of the package, rediscovered; restored afterwards."""
    backends.names()  # the real backends first, as a run has them
    monkeypatch.setattr(backends, "__path__", [*backends.__path__, str(tmp_path)])
    monkeypatch.setattr(backends, "_REGISTRY", dict(backends._REGISTRY))
    monkeypatch.setattr(backends, "_discovered", False)
    added: list[str] = []
    yield tmp_path, added
    for mod in added:
        sys.modules.pop(f"harness.backends.{mod}", None)


def test_a_new_module_registers_itself(scratch_registry):
    folder, added = scratch_registry
    (folder / "zz_dropped.py").write_text(NEW_BACKEND.format(name="dropped-in"))
    # a helper module (leading underscore) is not a backend: importing it would fail the discovery
    (folder / "_helper.py").write_text("raise RuntimeError('a helper module was imported as a backend')\n")
    added.append("zz_dropped")
    names = backends.names()
    assert names[: len(NAMES_BEFORE)] == NAMES_BEFORE
    assert names[len(NAMES_BEFORE) :] == ("dropped-in",)  # no registry_order: listed after the others
    assert type(backends.get("dropped-in")).__name__ == "Dropped"
    assert "harness.backends._helper" not in sys.modules


def test_a_new_module_reusing_a_name_is_refused(scratch_registry):
    folder, added = scratch_registry
    (folder / "zz_clash.py").write_text(NEW_BACKEND.format(name="onnxruntime"))
    added.append("zz_clash")
    with pytest.raises(ValueError, match="'onnxruntime' registered twice"):
        backends.names()
