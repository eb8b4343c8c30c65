"""Adapters to neighbouring libraries.

``torchkern.integrations.gpytorch.GPyTorchKernel``: a torchkern kernel as a GPyTorch
kernel. The submodule imports GPyTorch, so it is loaded on first use, not with torchkern.
"""
import importlib

__all__ = ["GPyTorchKernel"]


def __getattr__(name):
    if name == "GPyTorchKernel":
        return importlib.import_module(".gpytorch", __name__).GPyTorchKernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
