"""Within a tie, the second objective orders the candidates (least host memory, then the simplest deployment) and
the answer says what to do: "any of these; X if memory matters"."""

from __future__ import annotations

import pytest
from test_report_decision import camera, cell

from harness.decide.by_candidates import answer_of


def test_a_tie_puts_the_least_memory_first_and_says_so():
    # the same e2e timing: tied; onnxruntime comes first on the figure's order (its id), openvino is lighter
    dec = camera([cell("onnxruntime", 20.0, memory=400.0), cell("openvino", 20.0, memory=300.0)])
    assert dec.tied, "the two must be tied for this test to mean anything"
    assert dec.pick.cand.rec.backend == "openvino" and [s.cand.rec.backend for s in dec.tied] == [
        "onnxruntime"
    ]
    assert dec.tie_advice.startswith("any of these; openvino if memory matters (host peak RSS 300 MiB")
    assert answer_of(dec).tie_reason.startswith("any of these; openvino if memory matters")


@pytest.mark.parametrize("other", [300.0, 302.0])  # equal, and within the 1% an RSS reading moves by
def test_without_a_memory_difference_the_figure_order_stands_and_no_memory_advice_is_given(other):
    dec = camera([cell("onnxruntime", 20.0, memory=other), cell("openvino", 20.0, memory=300.0)])
    assert dec.tied and dec.pick.cand.rec.backend == "onnxruntime"
    assert (
        "if memory matters" not in dec.tie_advice
        and "no host-memory difference beyond 1% known" in dec.tie_advice
    )


def test_no_tie_no_advice():
    dec = camera([cell("openvino", 10.0, memory=400.0), cell("onnxruntime", 30.0, memory=300.0)])
    assert not dec.tied and dec.pick.cand.rec.backend == "openvino" and dec.tie_advice == ""
