"""Export diagnosis: classify failures from their messages, and measure operator coverage per runtime.

`classify` (harness.diagnosis.classify) turns an exception, traceback or signal into the record's `failure` dict;
`openvino_coverage` and `onnxruntime_coverage` (harness.diagnosis.coverage) count the operators a runtime places on
the requested device. Coverage imports its runtime lazily, so importing this package stays cheap.
"""

from harness.diagnosis.classify import classify, failure_classes

__all__ = ["classify", "failure_classes"]
