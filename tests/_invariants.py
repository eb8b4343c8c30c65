"""Comparisons of what is invariant, for results that are defined only up to a symmetry.

Two code paths (or the same path on another machine or thread count) round differently.
What rounding may change, and what these helpers therefore ignore:

- the numbering of clusters: k-means on eigenvectors whose signs or rotation depend on
  rounding numbers the same partition differently -> :func:`assert_same_partition`;
- the sign of each eigenvector of a simple eigenvalue -> :func:`assert_close_up_to_sign`
  (or :func:`match_signs`, to feed one side's coordinates to the other);
- the basis of the eigenspace of a cluster of (near-)equal eigenvalues ->
  :func:`assert_same_subspace` (principal angles).

Each check still fails on a real difference: another partition, another direction,
another subspace (``tests/test_invariants.py`` shows it).
"""
import numpy as np
import torch


def _numpy(a):
    if isinstance(a, torch.Tensor):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def assert_same_partition(a, b):
    """``a`` and ``b`` (label vectors) split the samples into the same groups, whatever the
    numbers of the groups: an exact one-to-one matching of labels (the adjusted Rand index
    is then 1)."""
    a, b = _numpy(a).ravel(), _numpy(b).ravel()
    assert a.shape == b.shape, f"label vectors of different lengths: {a.shape} vs {b.shape}"
    pairs = np.unique(np.stack([a, b], 1), axis=0) if a.size else np.empty((0, 2))
    na, nb = len(np.unique(a)), len(np.unique(b))
    # a bijection between the labels of a and of b: each label pairs with exactly one
    if not (len(pairs) == na == nb):
        bad = int(np.count_nonzero(b != _relabel_by_majority(a, b)))
        raise AssertionError(
            f"not the same partition: {na} groups vs {nb}, {len(pairs)} label pairs; "
            f"{bad} of {a.size} samples are not in the majority group of their label")


def _relabel_by_majority(a, b):
    """b's majority label for each label of a, sample by sample (for the message)."""
    out = np.empty_like(b)
    for lab in np.unique(a):
        idx = a == lab
        vals, counts = np.unique(b[idx], return_counts=True)
        out[idx] = vals[counts.argmax()]
    return out


def _columns(u):
    u = _numpy(u).astype(np.float64, copy=False)
    return u[:, None] if u.ndim == 1 else u


def match_signs(u, v):
    """``u`` with each column's sign flipped to agree with the same column of ``v`` (the
    sign of their inner product; + where it is 0). Same type and shape as ``u``."""
    U, V = _columns(u), _columns(v)
    assert U.shape == V.shape, f"shapes differ: {U.shape} vs {V.shape}"
    s = np.sign((U * V).sum(0))
    s[s == 0] = 1
    if isinstance(u, torch.Tensor):
        st = torch.as_tensor(s, dtype=u.dtype, device=u.device)
        return u * st if u.ndim > 1 else u * st[0]
    return np.asarray(u) * (s if np.ndim(u) > 1 else s[0])


def assert_close_up_to_sign(u, v, rtol=1e-7, atol=0.0):
    """Each column of ``u`` equals the same column of ``v`` or its negative (eigenvectors
    of simple eigenvalues, projections onto them), within ``rtol``/``atol`` entrywise."""
    np.testing.assert_allclose(_columns(match_signs(u, v)), _columns(v), rtol=rtol,
                               atol=atol)


def _orthonormal_basis(u):
    U = _columns(u)
    Q, s, _ = np.linalg.svd(U, full_matrices=False)
    assert s.size and s[-1] > 1e-10 * s[0], "the columns do not span a subspace of full rank"
    return Q


def principal_angle_sines(u, v):
    """Sines of the principal angles between span(u) and span(v) (after
    orthonormalization), largest first: the singular values of (I - Q_u Q_uᵀ) Q_v."""
    Qu, Qv = _orthonormal_basis(u), _orthonormal_basis(v)
    assert Qu.shape == Qv.shape, f"subspaces of different dimensions: {Qu.shape} vs {Qv.shape}"
    # from the residual, not sqrt(1 - cos²) of Q_uᵀQ_v's singular values: accurate for
    # small angles
    return np.linalg.svd(Qv - Qu @ (Qu.T @ Qv), compute_uv=False)


def assert_same_subspace(u, v, atol=1e-8):
    """span(u) = span(v): the largest principal angle has sine at most ``atol``. For the
    eigenvectors of a cluster of (near-)equal eigenvalues, which any rotation may mix."""
    sin = principal_angle_sines(u, v)
    assert sin[0] <= atol, f"subspaces differ: largest principal angle sine {sin[0]:.3e} > {atol}"
