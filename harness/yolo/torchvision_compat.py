"""torchvision's Python parts where its compiled operators do not load.

ultralytics' classification dataset and transform (and its validators) import torchvision. On this stack
(torchvision 0.28, a CUDA build, beside the CPU build of torch 2.13) `import torchvision` fails with `operator
torchvision::nms does not exist`: its compiled operators do not load, and registering their fake kernels fails.
`load_torchvision` imports it with those two registrations (nms, qnms) skipped and sets its `ops.nms` to ultralytics'
own TorchNMS.nms (which matches torchvision's), in this process only; where torchvision loads as it is, it does
nothing.
"""

from __future__ import annotations

import logging
import subprocess
import sys

import harness  # noqa: F401  (offline environment before ultralytics is imported)

log = logging.getLogger(__name__)


def load_torchvision() -> bool:
    """Where torchvision's compiled ops do not load: import its Python parts without them and stand ultralytics' NMS
    in for `torchvision.ops.nms`, in this process; True if it did (False: torchvision is imported already, or
    loads as it is)."""
    if "torchvision" in sys.modules:
        return False
    probe = [sys.executable, "-c", "import torch, torchvision.ops; torchvision.ops.nms"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return False
    import torch
    from ultralytics.utils.nms import TorchNMS

    register_fake = torch.library.register_fake

    def without_compiled_ops(op, *args, **kwargs):
        # torchvision registers fake kernels for its compiled nms and qnms, which this build lacks: skip those two
        if isinstance(op, str) and op.startswith("torchvision::"):
            return (lambda fn: fn) if not args and "func" not in kwargs else None
        return register_fake(op, *args, **kwargs)

    torch.library.register_fake = without_compiled_ops
    try:
        import torchvision
    finally:
        torch.library.register_fake = register_fake
    torchvision.ops.nms = TorchNMS.nms
    log.info(
        "torchvision's compiled ops do not load here: its Python parts without them, ultralytics' TorchNMS"
    )
    return True
