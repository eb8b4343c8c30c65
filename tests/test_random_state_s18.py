"""A NumPy RandomState (or numpy Generator) as random_state, as scikit-learn's estimators
take one: one seed is drawn from it per use, so the result equals the one for a
torch.Generator seeded with that draw, and the state advances."""
import copy

import numpy as np
import pytest
import torch

import torchkern as tk
from torchkern.stats import median_heuristic


def _seed_of(state):
    """The seed torchkern draws from a copy of ``state`` (RandomState or Generator)."""
    c = copy.deepcopy(state)
    if isinstance(c, np.random.RandomState):
        return int(c.randint(2 ** 63 - 1, dtype=np.int64))
    return int(c.integers(2 ** 63 - 1))


X = torch.randn(40, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("state", [np.random.RandomState(7), np.random.default_rng(0)])
def test_numpy_random_state_is_one_seed_drawn_from_it(state):
    seed = _seed_of(state)
    got = median_heuristic(X, max_samples=10, random_state=state)
    ref = median_heuristic(X, max_samples=10, random_state=torch.Generator().manual_seed(seed))
    assert got == ref
    # the state advanced: the second use is the one for the next seed drawn from it
    seed2 = _seed_of(state)
    assert seed2 != seed
    again = median_heuristic(X, max_samples=10, random_state=state)
    assert again == median_heuristic(X, max_samples=10,
                                     random_state=torch.Generator().manual_seed(seed2))


def test_random_fourier_features_and_nystroem_take_a_random_state():
    rs = np.random.RandomState(3)
    seed = _seed_of(rs)
    f = tk.approx.RandomFourierFeatures(tk.RBF(1.0), 64, random_state=rs)
    g = tk.approx.RandomFourierFeatures(tk.RBF(1.0), 64,
                                        random_state=torch.Generator().manual_seed(seed))
    assert torch.equal(f(X), g(X))
    rs = np.random.RandomState(4)
    seed = _seed_of(rs)
    a = tk.approx.Nystroem(tk.RBF(1.0), n_components=10, random_state=rs).fit(X).transform(X)
    b = tk.approx.Nystroem(tk.RBF(1.0), n_components=10,
                           random_state=torch.Generator().manual_seed(seed)).fit(X).transform(X)
    assert torch.equal(a, b)


def test_graphlet_sampling_takes_a_random_state_without_drawing_at_construction():
    from torch_geometric.data import Data
    from torchkern.graphs import GraphletSampling
    ring = Data(edge_index=torch.tensor([[0, 1, 2, 3, 4, 1, 2, 3, 4, 0],
                                         [1, 2, 3, 4, 0, 0, 1, 2, 3, 4]]), num_nodes=5)
    rs = np.random.RandomState(5)
    before = rs.get_state()[1].copy()
    k = GraphletSampling(k=3, n_samples=50, random_state=rs)
    assert np.array_equal(rs.get_state()[1], before)  # construction draws nothing
    seed = _seed_of(rs)
    ref = GraphletSampling(k=3, n_samples=50, random_state=seed)
    assert torch.equal(k.features([ring]), ref.features([ring]))
    assert torch.equal(k.features([ring]), k.features([ring]))  # the object keeps its draws


def test_random_state_of_another_type_is_refused_by_name():
    with pytest.raises(TypeError, match="random_state must be None, an int, a torch.Generator"):
        median_heuristic(X, max_samples=10, random_state="0")
    with pytest.raises(TypeError, match="random_state"):
        tk.approx.RandomFourierFeatures(tk.RBF(1.0), 8, random_state=1.5)
