"""Kernels on graphs (torch_geometric data): between graphs, and on the nodes of one graph."""

from .nodes import CommuteTime, DiffusionKernel, NodeSet, PStepRandomWalk, RegularizedLaplacian

__all__ = ["CommuteTime", "DiffusionKernel", "NodeSet", "PStepRandomWalk", "RegularizedLaplacian"]
