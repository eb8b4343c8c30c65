"""Graph kernels on an accelerator give the CPU's numbers (float64).

Runs on ``["cuda"]`` where CUDA is present and is skipped elsewhere (CI has no GPU), as in
tests/test_devices.py; ``TORCHKERN_TEST_DEVICES=cpu`` runs it against the CPU itself.
"""

import pytest
import torch
from torch_geometric.data import Data

from tests._devices import dev, requires_device  # noqa: F401 (fixture)
from torchkern.graphs import (DiffusionKernel, RandomWalk, RegularizedLaplacian, ShortestPath,
                              WeisfeilerLehman)

pytestmark = requires_device


def _graphs(count, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        n = int(torch.randint(3, 15, (1,), generator=g))
        A = torch.rand(n, n, generator=g) < 0.3
        A = torch.triu(A, 1)
        A = A | A.T
        edge_index = A.nonzero().T.contiguous()
        x = torch.nn.functional.one_hot(torch.randint(0, 3, (n,), generator=g), 3).float()
        bond = torch.randint(0, 2, (n, n), generator=g)
        bond = torch.triu(bond, 1) + torch.triu(bond, 1).T  # one label per undirected edge
        edge_attr = bond[edge_index[0], edge_index[1]].float()[:, None]
        out.append(Data(x=x, edge_index=edge_index, edge_attr=edge_attr, num_nodes=n))
    return out


@pytest.mark.parametrize("kernel", [WeisfeilerLehman(3), WeisfeilerLehman(2, normalize=True),
                                    WeisfeilerLehman(3, edge_labels=True),
                                    ShortestPath(), RandomWalk(0.01, labeled=False),
                                    RandomWalk(0.01, labeled=True),
                                    RandomWalk(0.01, edge_labels=True)],
                         ids=["wl", "wl-normalized", "wl-edge-labels", "sp", "rw", "rw-labeled",
                              "rw-edge-labels"])
def test_graph_kernels_on_device(dev, kernel):
    graphs = _graphs(30)
    ref = kernel(graphs[:12], graphs).to_dense()
    X = kernel.check_input(graphs).to(device=dev)
    K = kernel(X[:12], X)
    assert K.device.type == dev.type
    torch.testing.assert_close(K.to_dense().cpu(), ref, rtol=1e-12, atol=1e-12)


def test_graphs_converted_on_device(dev):
    """Data already on the device, edges shuffled and one duplicated: the conversion (edge
    merging, label ids) and the WL relabelling run there and give the CPU's numbers."""
    graphs = _graphs(30, seed=2)
    g = torch.Generator().manual_seed(3)
    moved = []
    for d in graphs:
        perm = torch.randperm(d.edge_index.shape[1], generator=g)
        perm = torch.cat([perm, perm[:1]])
        moved.append(Data(x=d.x, edge_index=d.edge_index[:, perm], edge_attr=d.edge_attr[perm],
                          num_nodes=d.num_nodes).to(dev))
    for kernel in (WeisfeilerLehman(3), WeisfeilerLehman(3, edge_labels=True)):
        K = kernel(moved)
        assert K.device.type == dev.type
        torch.testing.assert_close(K.to_dense().cpu(), kernel(graphs).to_dense(), rtol=0, atol=0)


@pytest.mark.parametrize("kernel", [DiffusionKernel(0.7, method="krylov"),
                                    RegularizedLaplacian(0.5, method="krylov")],
                         ids=["diffusion", "regularized-laplacian"])
def test_node_kernel_matvec_on_device(dev, kernel):
    g = torch.Generator().manual_seed(1)
    n = 500
    src = torch.randint(0, n, (3000,), generator=g)
    dst = torch.randint(0, n, (3000,), generator=g)
    graph = Data(edge_index=torch.stack([src, dst]), num_nodes=n)
    V = torch.randn(n, 3, dtype=torch.float64, generator=g)
    ref = kernel(graph) @ V
    K = kernel(graph.to(dev))
    torch.testing.assert_close((K @ V.to(dev)).cpu(), ref, rtol=1e-8, atol=1e-8)
