"""Inductor options laid over ExecuTorch's own for a CUDA export, through the hook its AOTInductor backend reads
them from (used by the export on a GPU, harness.backends.executorch_cuda, and by the trace on a fake device,
harness.backends._shared.executorch_cuda_trace)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

#: the hook executorch's AotiBackend.preprocess reads its Inductor options from (executorch 1.2 to 1.5:
#: `options = cls.get_aoti_compile_options(compile_specs)`, then `torch._inductor.aot_compile(..., options=options)`)
OPTIONS_HOOK = "get_aoti_compile_options"


@contextlib.contextmanager
def compile_options(backend_cls, overrides: dict, seen: dict) -> Iterator[None]:
    """`backend_cls.get_aoti_compile_options` returns its own options with `overrides` laid over them while this
    is open (the class's own classmethod is put back after). `seen` gets what the backend would have used for each
    overridden key (`executorch_defaults`) and the overrides."""
    owner = next((k for k in backend_cls.__mro__ if OPTIONS_HOOK in k.__dict__), None)
    if owner is None:
        raise AttributeError(
            f"{backend_cls.__name__} has no {OPTIONS_HOOK}: this executorch is not one the harness knows"
        )
    original = owner.__dict__[OPTIONS_HOOK]
    func = original.__func__ if isinstance(original, classmethod) else original

    def patched(cls, compile_specs):
        options = dict(func(cls, compile_specs))
        seen["executorch_defaults"] = {k: options.get(k, "(not set)") for k in overrides}
        options.update(overrides)
        return options

    seen["overrides"] = dict(overrides)
    setattr(backend_cls, OPTIONS_HOOK, classmethod(patched))
    try:
        yield
    finally:
        if owner is backend_cls:
            setattr(backend_cls, OPTIONS_HOOK, original)
        else:
            delattr(backend_cls, OPTIONS_HOOK)
