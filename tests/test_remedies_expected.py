"""The remedy ladder and the expected-status file, on real records' shapes."""

from __future__ import annotations

from harness.core.axes import Shape
from harness.core.cell import Cell
from harness.core.record import CellRecord, new_record
from harness.execute.remedies import combined_change, ladder, matching, padded
from harness.plan.expected import ExpectedStatus


def _cell(**kw):
    base = {
        "size": "n",
        "task": "detect",
        "head": "e2e",
        "backend": "executorch-xnnpack",
        "device": "cpu",
        "shape": Shape(0, 0, dynamic=True),
    }
    base.update(kw)
    return Cell(**base)


def test_guard_violation_on_dynamic_export_gets_the_32_dim_remedy_first():
    names = [r.name for r in matching(_cell(), "guard_violation", dynamic=True)]
    assert names[0] == "dim-multiple-of-32"


def test_unsupported_op_on_e2e_head_gets_the_raw_head():
    assert "raw-head" in [r.name for r in matching(_cell(), "unsupported_op", dynamic=True)]
    assert "raw-head" not in [r.name for r in matching(_cell(head="raw"), "unsupported_op", dynamic=True)]


def test_message_condition_selects_the_xnnpack_reshape_fallback():
    msg = "XNNPACK reshape only supports 1 dynamic dimension. This may occur when"
    names = [r.name for r in matching(_cell(head="raw"), "unsupported_op", True, msg)]
    assert names == ["xnnpack-reshape-fallback"]
    assert "xnnpack-reshape-fallback" not in [
        r.name for r in matching(_cell(head="raw"), "unsupported_op", True)
    ]


def test_backbone_only_is_for_aoti_style_backends_on_static_shapes():
    c = _cell(backend="executorch-cuda", device="cuda", shape=Shape(640, 640))
    assert matching(c, "unsupported_op")[0].name == "backbone-only"
    assert "backbone-only" not in [r.name for r in matching(_cell(shape=Shape(640, 640)), "unsupported_op")]


def test_non_multiple_of_32_shapes_get_letterbox_padding():
    c = _cell(backend="onnxruntime", shape=Shape(650, 650))
    assert [r.name for r in matching(c, "runtime_error")][-1] == "letterbox-pad-32"
    assert padded(650, 32) == 672 and padded(640, 32) == 640


def test_remedies_compose():
    by = {r.name: r for r in ladder()}
    change = combined_change([by["dim-multiple-of-32"], by["raw-head"], by["xnnpack-reshape-fallback"]])
    assert change["head"] == "raw"
    assert change["export_options"] == {
        "multiple_of_32": True,
        "xnnpack_exclude_configs": ["squeeze", "viewcopy"],
    }


def _rec(status, klass=None, cell_id="c1") -> CellRecord:
    rec = new_record("r", _cell(), "random-init:0")
    rec.cell_id = cell_id
    rec.status = status
    rec.reason = "why"
    rec.failure = {"class": klass} if klass else None
    return rec


def test_expected_failure_is_xfail_new_failure_fails_new_pass_is_strict_xpass(tmp_path):
    f = tmp_path / "expected.yaml"
    f.write_text("expected:\n  c1: {status: export_failed, class: guard_violation, reason: known}\n")
    exp = ExpectedStatus(f)
    assert exp.judge(_rec("export_failed", "guard_violation"), "CMD").outcome == "xfail"
    other = exp.judge(_rec("export_failed", "unsupported_op"), "CMD")
    assert other.outcome == "fail" and "CMD" in other.message
    assert exp.judge(_rec("run_failed", "runtime_error", "c2"), "CMD").outcome == "fail"
    xpass = exp.judge(_rec("ok"), "pytest suites/ --update-expected")
    assert xpass.outcome == "xpass" and "pytest suites/ --update-expected" in xpass.message
    assert exp.judge(_rec("ok", cell_id="c2"), "CMD").outcome == "pass"


def test_update_records_failures_drops_passes_and_keeps_skips(tmp_path):
    f = tmp_path / "expected.yaml"
    f.write_text(
        "expected:\n  c1: {status: export_failed, class: guard_violation}\n  c3: {status: crashed}\n"
    )
    exp = ExpectedStatus(f)
    added, removed = exp.update(
        [_rec("ok", cell_id="c1"), _rec("timeout", "timeout", "c2"), _rec("skipped", cell_id="c3")]
    )
    assert (added, removed) == (1, 1)
    again = ExpectedStatus(f)
    assert set(again.entries) == {"c2", "c3"} and again.entries["c2"]["class"] == "timeout"
    assert f.read_text().startswith("# Known failing cells")


def test_a_crashed_aoti_probe_climbs_to_the_loader_rungs_and_nothing_else_does():
    aoti = _cell(backend="aoti", shape=Shape(640, 640))
    names = [r.name for r in matching(aoti, "crash", message="probe-640x640 process killed by SIGSEGV")]
    assert names[:2] == ["aoti-skip-isa-check", "aoti-direct-loader"]
    by = {r.name: r for r in ladder()}
    change = combined_change([by["aoti-skip-isa-check"], by["aoti-direct-loader"]])
    assert change["export_options"] == {}  # the same artifact: nothing is exported again
    assert change["load_options"] == {"aoti_vec_isa_ok": True, "aoti_loader": "direct"}
    # a crash in the export (not the probe) or on another backend gets no loader rung
    assert not {"aoti-skip-isa-check", "aoti-direct-loader"} & {
        r.name for r in matching(aoti, "crash", message="export process killed by SIGSEGV")
    }
    ort = _cell(backend="onnxruntime", shape=Shape(640, 640))
    assert "aoti-direct-loader" not in [r.name for r in matching(ort, "crash", message="probe-640x640 ...")]


def test_the_h100s_native_crash_in_the_packages_libstdcxx_is_exported_again_linked_to_the_shared_one():
    """The message a probe crash gets where the native frames show the H100's crash (inside the C++ library's code,
    called from torch::aot_inductor): the first rung loads the same package with the system libstdc++ preloaded
    (no new export), the second exports again with the shared libstdc++; without that native evidence (no handler,
    or another crash) the ladder goes straight to the loader rungs."""
    aoti = _cell(backend="aoti", shape=Shape(640, 640))
    h100 = (
        "probe-640x640 process killed by SIGSEGV in torch.export.pt2_archive._package._load_aoti (torch's own code, "
        "called from harness.backends.aoti.load_package); natively in the C++ standard library's code called from "
        "torch::aot_inductor::parse_device_str in c1.wrapper.so"
    )
    names = [r.name for r in matching(aoti, "crash", message=h100)]
    assert names[:4] == [
        "aoti-preload-libstdcxx",
        "aoti-shared-libstdcxx",
        "aoti-skip-isa-check",
        "aoti-direct-loader",
    ]
    by = {r.name: r for r in ladder()}
    assert combined_change([by["aoti-preload-libstdcxx"]]) == {
        "export_options": {},
        "load_options": {"aoti_preload_libstdcxx": True},
    }
    assert combined_change([by["aoti-shared-libstdcxx"]])["export_options"] == {
        "aoti_link": "shared-libstdcxx"
    }
    for other in (
        h100.split("; natively")[0],  # no native frames
        h100.replace("torch::aot_inductor::", "cv::"),  # the C++ library called from someone else's code
    ):
        got = [r.name for r in matching(aoti, "crash", message=other)]
        assert "aoti-shared-libstdcxx" not in got and "aoti-preload-libstdcxx" not in got
    got = [r.name for r in matching(aoti, "timeout", message=h100)]
    assert "aoti-shared-libstdcxx" not in got and "aoti-preload-libstdcxx" not in got
