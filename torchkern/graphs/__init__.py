"""Kernels between graphs (torch_geometric ``Data``) and on the nodes of a graph.

Kernels between graphs take a list of ``torch_geometric.data.Data`` (or of ``Batch``
objects), a ``Batch``, a torch-geometric ``Dataset`` (``TUDataset``, any
``InMemoryDataset``), a ``DataLoader`` that does not shuffle, or a :class:`GraphSet`, and
return a lazy KernelMatrix like every torchkern kernel.

On node labels (``x``; edge labels ``edge_attr`` where said): :class:`VertexHistogram`,
:class:`EdgeHistogram`, :class:`WeisfeilerLehman`, :class:`WeisfeilerLehmanOptimalAssignment`,
:class:`ShortestPath`, :class:`RandomWalk`, :class:`GraphletSampling`,
:class:`Propagation`, :class:`NeighborhoodHash`, :class:`PyramidMatch`,
:class:`NeighborhoodSubgraphPairwiseDistance`, :class:`ODDSTh`,
:class:`SubgraphMatching`, and :class:`HadamardCode` over a feature-map one (WL,
shortest path, ...); :class:`CoreFramework` over any graph kernel of this list or the
next two. On continuous
node attributes (the field ``node_attributes``, see :class:`GraphSet`):
:class:`GraphHopper`, :class:`PropagationAttr`, :class:`MultiscaleLaplacian`
(attributes or one-hot labels). On the edges only, through geometric
embeddings (orthonormal labellings): :class:`LovaszTheta`, :class:`SVMTheta`.

Kernels on the nodes of one graph (:class:`NodeSet`): :class:`DiffusionKernel`,
:class:`RegularizedLaplacian`, :class:`PStepRandomWalk`, :class:`CommuteTime`.
"""
from ._batch import GraphSet
from .core import CoreFramework
from .graphlet import GraphletSampling
from .neighborhood_hash import NeighborhoodHash
from .nspdk import NeighborhoodSubgraphPairwiseDistance
from .odd_sth import ODDSTh
from .nodes import (CommuteTime, DiffusionKernel, NodeSet, PStepRandomWalk,
                    RegularizedLaplacian)
from .pyramid_match import PyramidMatch
from .random_walk import RandomWalk
from .shortest_path import ShortestPath
from .wl import WeisfeilerLehman
# part A of issue 24: attributes, assignment, propagation and histogram kernels
from .graphhopper import GraphHopper
from .histogram import EdgeHistogram, VertexHistogram
from .propagation import Propagation, PropagationAttr
from .wl_oa import WeisfeilerLehmanOptimalAssignment

__all__ = ["GraphSet", "WeisfeilerLehman", "ShortestPath", "RandomWalk", "GraphletSampling",
           "NeighborhoodHash", "PyramidMatch", "CoreFramework",
           "NeighborhoodSubgraphPairwiseDistance", "ODDSTh",
           "NodeSet", "DiffusionKernel", "RegularizedLaplacian", "PStepRandomWalk", "CommuteTime"]
__all__ += ["VertexHistogram", "EdgeHistogram", "WeisfeilerLehmanOptimalAssignment",
            "GraphHopper", "Propagation", "PropagationAttr"]
# H3 of issue 24: Hadamard code and subgraph matching kernels
from .hadamard_code import HadamardCode  # noqa: E402
from .subgraph_matching import SubgraphMatching  # noqa: E402

__all__ += ["HadamardCode", "SubgraphMatching"]
# H1 of issue 24: Lovász-θ and SVM-θ kernels
from .theta import LovaszTheta, SVMTheta  # noqa: E402

__all__ += ["LovaszTheta", "SVMTheta"]
# H2 of issue 24 (session 8): the multiscale Laplacian kernel
from .multiscale_laplacian import MultiscaleLaplacian  # noqa: E402

__all__ += ["MultiscaleLaplacian"]
