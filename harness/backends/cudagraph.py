"""CUDA-graph variants of the torch-based backends (`torch-eager-cudagraph`, `aoti-cudagraph`), CUDA only.

Each is a backend of its own because its latency is a different measurement (see harness.gputiming).
"""

from harness.backends import register
from harness.backends.aoti import Aoti
from harness.backends.torch_eager import TorchEager
from harness.gputiming import cudagraph_backend

TorchEagerCudaGraph = register(cudagraph_backend(TorchEager))
AotiCudaGraph = register(cudagraph_backend(Aoti))
