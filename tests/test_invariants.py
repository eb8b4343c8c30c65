"""The invariant comparisons of tests/_invariants.py pass on a symmetry and fail on a real
difference."""
import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from tests._invariants import (assert_close_up_to_sign, assert_same_partition,
                               assert_same_subspace, match_signs, principal_angle_sines)


def test_partition_ignores_numbering_and_catches_a_moved_sample():
    a = np.array([0, 0, 1, 1, 2, 2, 2])
    assert_same_partition(a, np.array([2, 2, 0, 0, 1, 1, 1]))  # renumbered
    assert_same_partition(torch.tensor(a), [5, 5, -1, -1, 7, 7, 7])
    moved = np.array([2, 2, 0, 1, 1, 1, 1])  # one sample in another group
    assert adjusted_rand_score(a, moved) < 1
    with pytest.raises(AssertionError, match="not the same partition"):
        assert_same_partition(a, moved)
    with pytest.raises(AssertionError, match="not the same partition"):
        assert_same_partition(a, np.array([0, 0, 1, 1, 2, 2, 3]))  # a group split
    with pytest.raises(AssertionError, match="not the same partition"):
        assert_same_partition(a, np.array([0, 0, 0, 0, 2, 2, 2]))  # two groups merged
    with pytest.raises(AssertionError, match="lengths"):
        assert_same_partition(a, a[:-1])


def test_signs_per_column():
    g = np.random.default_rng(0)
    u = g.normal(size=(20, 3))
    v = u * np.array([1, -1, -1])
    assert_close_up_to_sign(u, v, rtol=0, atol=0)
    assert_close_up_to_sign(torch.tensor(u[:, 0]), torch.tensor(-u[:, 0]), rtol=0, atol=0)
    np.testing.assert_array_equal(match_signs(v, u), u)
    t = match_signs(torch.tensor(v), u)
    assert isinstance(t, torch.Tensor) and torch.equal(t, torch.tensor(u))
    with pytest.raises(AssertionError):  # a sign flip within a column is not a symmetry
        w = v.copy()
        w[0, 1] *= -1
        assert_close_up_to_sign(u, w, rtol=1e-7)
    with pytest.raises(AssertionError):  # nor is a rotation of two columns
        c, s = np.cos(0.1), np.sin(0.1)
        assert_close_up_to_sign(u, u @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]), atol=1e-6)


def test_subspace_ignores_the_basis_and_catches_another_direction():
    g = np.random.default_rng(1)
    U = np.linalg.qr(g.normal(size=(30, 4)))[0]
    R = np.linalg.qr(g.normal(size=(4, 4)))[0]
    assert_same_subspace(U, U @ R, atol=1e-12)  # any basis of the same span
    assert_same_subspace(torch.tensor(U), 3.0 * U @ np.triu(g.normal(size=(4, 4))) + 0,
                         atol=1e-10)  # not orthonormal: orthonormalized first
    V = U.copy()
    V[:, 3] = U[:, 3] + 1e-3 * np.linalg.qr(np.c_[U, g.normal(size=30)])[0][:, 4]
    sin = principal_angle_sines(U, V)
    assert 0.9e-3 < sin[0] < 1.1e-3 and sin[1] < 1e-12  # one angle of about 1e-3
    assert_same_subspace(U, V, atol=2e-3)
    with pytest.raises(AssertionError, match="subspaces differ"):
        assert_same_subspace(U, V, atol=1e-4)
    with pytest.raises(AssertionError, match="dimensions"):
        assert_same_subspace(U, U[:, :3])
