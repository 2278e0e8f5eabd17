"""The model's work per inference: floating-point operations counted on a forward pass, and the elements that pass
must move at least (harness.core.roofline turns them into bytes at a cell's precision and an arithmetic intensity).

FLOPs are torch's own count (torch.utils.flop_counter.FlopCounterMode) of the operators it has formulas for:
convolutions (aten.convolution and its variants), matrix products (aten.mm, addmm, bmm, baddbmm, and the
scaled-dot-product attention kernels), 2 per multiply-accumulate; elementwise operators, pooling, upsampling,
softmax and top-k are not counted (a few percent of a convolutional network's work: the count is a floor, as
ultralytics' own figure is). The elements moved at least: every parameter and buffer of the model once, the input,
and the output of every counted operator written once (an elementwise operator fused into the layer that feeds it
moves nothing more; views move nothing).

The run counts on the fp32 reference model of the exported graph, on the forward pass parity runs anyway
(harness.measure.parity.References): no second model and no second export. `count` also runs on the meta device,
where nothing is computed (shapes only): scripts/model_work.py fills the committed table harness/core/model_work.json
that way, for records written before the count existed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

#: how the count is made, in the record's `roofline.work_source`
METHOD = (
    "torch.utils.flop_counter.FlopCounterMode on the fp32 reference model ({ops}); elements: parameters and "
    "buffers once, the input, each counted operator's output once"
)


class _Outputs:
    """A TorchDispatchMode (built lazily: torch is imported only when counting) that adds up the elements of the
    outputs of the operators FlopCounterMode counts."""

    @staticmethod
    def mode(counted: set) -> Any:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        class Outputs(TorchDispatchMode):
            def __init__(self) -> None:
                super().__init__()
                self.elements: dict[str, int] = {}

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                packet = func._overloadpacket
                if packet in counted:
                    n = sum(int(t.numel()) for t in tree_flatten(out)[0] if hasattr(t, "numel"))
                    self.elements[str(packet)] = self.elements.get(str(packet), 0) + n
                return out

        return Outputs()


@contextlib.contextmanager
def counting(model: Any, example: Any) -> Iterator[dict]:
    """Count the work of the forward passes run inside: yields a dict filled when the block ends with `flops`,
    `ops` (FLOPs per operator), `weight_elements`, `input_elements`, `activation_elements` (and per operator,
    `activation_ops`) and `how`.

    `model` is the module (its parameters and buffers are the weights), `example` the input it is called on."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    counted = set(counter.flop_registry)
    outputs = _Outputs.mode(counted)
    result: dict = {}
    # the counter on top: it decomposes what inference mode leaves whole (aten.conv2d into aten.convolution) and
    # hands each operator down to the outputs' mode as it counts it
    with outputs, counter:
        yield result
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    weights = sum(int(p.numel()) for p in model.parameters()) + sum(int(b.numel()) for b in model.buffers())
    inputs = sum(int(t.numel()) for t in (example if isinstance(example, list | tuple) else [example]))
    ops = ", ".join(f"{op} {n / 1e9:.3g} GFLOP" for op, n in sorted(by_op.items(), key=lambda kv: -kv[1]))
    result.update(
        flops=int(counter.get_total_flops()),
        ops=by_op,
        weight_elements=weights,
        input_elements=inputs,
        activation_elements=sum(outputs.elements.values()),
        activation_ops=dict(outputs.elements),
        how=METHOD.format(ops=f"counted: {ops}" if ops else "no counted operator ran"),
        torch=torch.__version__,
    )


def count(model: Any, example: Any) -> tuple[Any, dict]:
    """(the model's outputs, its work) for one forward pass on `example`, under inference mode."""
    import torch

    with torch.inference_mode(), counting(model, example) as work:
        out = model(example)
    return out, work


def count_on_meta(model: Any, example: Any) -> dict:
    """The work of one forward pass computed on the meta device: shapes only, nothing computed (a second or so for
    yolo26x at 1280). `model` is moved to the meta device (pass a copy you no longer need); `example` is an input
    tensor or its shape. The detection heads keep their strides on the CPU: ultralytics' anchor maker reads them as
    numbers."""
    import torch

    heads = [(m, m.stride) for m in model.modules() if isinstance(getattr(m, "stride", None), torch.Tensor)]
    model = model.to("meta")
    for m, stride in heads:
        m.stride = stride
    x = example.to("meta") if isinstance(example, torch.Tensor) else torch.empty(example, device="meta")
    return count(model, x)[1]
