"""Random graph kernels with random_state=None (their default) or a generator object draw
once per kernel object: k(X), k(X, Y) and a fitted model's training and test Grams share
their draws, as GraKeL's fitted kernels do. Before, each call drew anew: k(X) twice
differed by 0.11 (NeighborhoodHash on MUTAG), so an SVC fitted and evaluated with the
default kernel compared graphs through different label codes, silently."""
import numpy as np
import pytest
import torch

import torchkern as tk
from tests.graphs.test_input_consistency import graphs
from torchkern.graphs import GraphletSampling, NeighborhoodHash
from torchkern.graphs.multiscale_laplacian import MultiscaleLaplacian


def _kernels():
    return [NeighborhoodHash(R=2), GraphletSampling(k=3, n_samples=30),
            MultiscaleLaplacian(features="labels", L=1, n_samples=8)]


@pytest.mark.parametrize("kernel", _kernels(), ids=lambda k: type(k).__name__)
def test_unseeded_kernel_draws_once_per_object(kernel):
    X = graphs(14, seed=4)
    K = kernel(X).to_dense()
    torch.testing.assert_close(kernel(X).to_dense(), K, rtol=0, atol=0)
    torch.testing.assert_close(kernel(X[:5], X).to_dense(), K[:5], rtol=1e-12, atol=1e-12)
    # a model fitted with it: its decision values on the training graphs are those of
    # the same SVC on the precomputed Gram
    y = torch.arange(14) % 2
    model = tk.SVC(kernel=kernel, C=1.0).fit(X, y)
    ref = tk.SVC(kernel="precomputed", C=1.0).fit(K, y)
    torch.testing.assert_close(model.decision_function(X), ref.decision_function(K),
                               rtol=1e-10, atol=1e-10)


def test_unseeded_draws_follow_the_global_seed_and_differ_between_objects():
    # numpy's global generator seeds MultiscaleLaplacian's landmarks, torch's the
    # graphlet samples; another object draws another seed
    X = graphs(10, seed=5)
    for make, seed in ((lambda: MultiscaleLaplacian(features="labels", L=1, n_samples=8),
                        np.random.seed),
                       (lambda: GraphletSampling(k=3, n_samples=30), torch.manual_seed)):
        seed(3)
        a = make()(X).to_dense()
        seed(3)
        torch.testing.assert_close(make()(X).to_dense(), a, rtol=0, atol=0)
        assert not torch.equal(make()(X).to_dense(), a)


def test_generator_objects_are_replayed_from_their_first_state():
    X = graphs(10, seed=6)
    k = NeighborhoodHash(R=2, random_state=np.random.RandomState(7))
    first = k(X).to_dense()
    torch.testing.assert_close(k(X).to_dense(), first, rtol=0, atol=0)
    # the first call draws what RandomState(7) draws: the int seed's codes
    torch.testing.assert_close(NeighborhoodHash(R=2, random_state=7)(X).to_dense(), first,
                               rtol=0, atol=0)
    g = GraphletSampling(k=3, n_samples=30, random_state=torch.Generator().manual_seed(9))
    first = g(X).to_dense()
    torch.testing.assert_close(g(X).to_dense(), first, rtol=0, atol=0)
    torch.testing.assert_close(GraphletSampling(k=3, n_samples=30, random_state=9)(X).to_dense(),
                               first, rtol=0, atol=0)
