"""Exact multiset ids of NSPDK (torchkern.graphs.nspdk.multiset_ids) against a brute-force
grouping of sorted tuples, on both direct paths (the count matrix of few groups × tokens,
and the sort of the packed keys) and when every hash collides (the exact fallback)."""
import pytest
import torch

import torchkern.graphs.nspdk as nspdk


def _brute(group, token, n_groups):
    sigs = [tuple(sorted(token[group == g].tolist())) for g in range(n_groups)]
    return [[sigs[a] == sigs[b] for b in range(n_groups)] for a in range(n_groups)]


def _same(ids, n_groups):
    return [[bool(ids[a] == ids[b]) for b in range(n_groups)] for a in range(n_groups)]


def _case(seed, spread=1):
    # spread > 1: the same few tokens, numbered among n_tokens = 5 * spread, so that the
    # 40 × n_tokens count cells exceed 2^16 and the ids come from the sort path
    g = torch.Generator().manual_seed(seed)
    n_groups, n_tokens = 40, 5 * spread
    # few tokens and short multisets: many equal multisets in different orders
    length = torch.randint(0, 4, (n_groups,), generator=g)
    group = torch.repeat_interleave(torch.arange(n_groups), length)
    token = torch.randint(0, 5, (group.numel(),), generator=g) * spread
    perm = torch.randperm(group.numel(), generator=g)
    return group[perm], token[perm], n_groups, n_tokens


@pytest.mark.parametrize("spread", [1, 400])
def test_multiset_ids_equal_brute_force_grouping(spread):
    for seed in range(3):
        group, token, n_groups, n_tokens = _case(seed, spread)
        ids, n_ids = nspdk.multiset_ids(group, token, n_groups, n_tokens)
        assert _same(ids, n_groups) == _brute(group, token, n_groups)
        assert n_ids == len(set(ids.tolist()))


@pytest.mark.parametrize("spread", [1, 400])
def test_multiset_ids_exact_when_every_hash_collides(monkeypatch, spread):
    # all codes 0: every group gets the same key, the check fails and the ids come from
    # the exact Weisfeiler-Lehman round
    monkeypatch.setattr(nspdk, "_mix", lambda h: torch.zeros_like(h))
    group, token, n_groups, n_tokens = _case(7, spread)
    ids, n_ids = nspdk.multiset_ids(group, token, n_groups, n_tokens)
    ref = _brute(group, token, n_groups)
    assert _same(ids, n_groups) == ref
    assert n_ids == len({tuple(r) for r in ref})


def test_nspdk_diagonal_is_the_grams_diagonal():
    # _diag counts the levels from the hop distances alone: against the diagonal of the
    # unnormalized Gram (levels with δ = 3, 4 missing from the short paths of X)
    from torch_geometric.data import Data

    from torchkern.graphs import NeighborhoodSubgraphPairwiseDistance as NSPDK

    def path(n, lab):
        s = torch.arange(n - 1)
        return Data(x=torch.tensor(lab)[:, None].float(), num_nodes=n,
                    edge_index=torch.stack([torch.cat([s, s + 1]), torch.cat([s + 1, s])]))

    X = [path(3, [0, 1, 0]), path(2, [1, 1]), Data(edge_index=torch.zeros(2, 0, dtype=torch.long),
                                                   x=torch.zeros(1, 1), num_nodes=1)]
    Y = [path(6, [0, 1, 0, 1, 1, 0]), path(4, [1, 0, 0, 1])]
    dx, dy = NSPDK()(X).to_dense().diag(), NSPDK()(Y).to_dense().diag()
    assert torch.equal(NSPDK().diag(X), dx) and torch.equal(NSPDK().diag(Y), dy)
    K = NSPDK()(X, Y).to_dense()
    torch.testing.assert_close(NSPDK(normalize=True)(X, Y).to_dense(),
                               K / (dx[:, None] * dy[None, :]).sqrt(), rtol=0, atol=1e-14)
