"""Random-walk graph kernels on the direct product graph, without forming A₁ ⊗ A₂."""
from __future__ import annotations

import math
import warnings

import torch

from .._validation import check_bool, is_int, is_real
from ..gram import DenseKernelMatrix, FeatureKernelMatrix
from ..kernels.structured import _inv_sqrt
from ..linalg import cg
from ..linalg._common import ConvergenceWarning
from ._batch import GraphKernel, GraphSet, check_memory, check_range, unify_labels

__all__ = ["RandomWalk"]

# One block of graph pairs holds about this many product-graph nodes (Σ over pairs of
# n₁n₂): a few (P, n₁, n₂) float64 tensors of 16 MB each.
_PRODUCT_BUDGET = 2 ** 21


class _ProductSystem:
    """The operator V ↦ V − λ M ∘ (A₁ V A₂ᵀ) of one graph pair per column.

    Columns are vec(V) of the (n₁, n₂) product-graph vectors of P pairs; pair p has its
    own A₁, A₂ (adjacency matrices, zero-padded) and mask M (1 on the product-graph nodes:
    matched labels, real nodes). M ∘ A₁VA₂ᵀ is (A₁ ⊗ A₂) vec(V) restricted to the product
    graph, so the operator is I − λA× on each pair, block-diagonal over columns, which is
    all that batched CG needs (it keeps one step length per column).
    """

    requires_grad = False

    def __init__(self, A1, A2, M, lam):
        self.A1, self.A2T, self.M, self.lam = A1, A2.transpose(-1, -2), M, lam
        n = M.shape[1] * M.shape[2]
        self.shape, self.dtype, self.device = (n, n), M.dtype, M.device

    def walk(self, V):
        """M ∘ (A₁ V A₂ᵀ) for V of shape (P, n₁, n₂): one step on every product graph.
        With edge labels (A of shape (P, C, n, n), one matrix per edge label) a step
        follows two edges of the same label: M ∘ Σ_c A₁⁽ᶜ⁾ V A₂⁽ᶜ⁾ᵀ."""
        if self.A1.dim() == 3:
            return self.M * torch.bmm(torch.bmm(self.A1, V), self.A2T)
        W = torch.matmul(torch.matmul(self.A1, V[:, None]), self.A2T)  # (P, C, n₁, n₂)
        return self.M * W.sum(1)

    def __matmul__(self, cols):
        P, (n1, n2) = self.M.shape[0], self.M.shape[1:]
        if cols.shape[1] != P:
            raise ValueError(f"the product-graph operator takes one column per graph pair "
                             f"({P}), got {cols.shape[1]}")
        V = cols.T.reshape(P, n1, n2)
        return (V - self.lam * self.walk(V)).reshape(P, -1).T


class RandomWalk(GraphKernel):
    r"""Random-walk graph kernel: weighted counts of common walks, as walks on the
    direct product graph (Gärtner et al., 2003; Vishwanathan et al., 2010).

    The product graph G₁ × G₂ has a node (u, v) for every u ∈ G₁, v ∈ G₂ with equal
    labels (``labeled=True``; all pairs when ``labeled=False``) and an edge
    (u, v) → (u', v') when u → u' and v → v'. With A× its adjacency matrix,

    - ``kind="geometric"``: k = Σ_{k≥0} λ^k 1ᵀA×^k 1 = 1ᵀ(I − λA×)⁻¹1, defined for
      λ < 1/(ρ(A₁)ρ(A₂)) (ρ the spectral radius);
    - ``kind="exponential"``: k = Σ_{k≥0} (λ^k/k!) 1ᵀA×^k 1 = 1ᵀ exp(λA×) 1;
    - ``p=<int>``: the series truncated after the term k = p (any λ > 0).

    With ``labeled=False`` and ``kind="geometric"`` this is GraKeL's
    ``RandomWalk(lamda=λ, method_type="baseline")`` (exact 1ᵀ(I − λA₁⊗A₂)⁻¹1); with
    ``p``, GraKeL's ``p`` (coefficients λ^k, or λ^k/k! for the exponential kind).

    How it is computed — A× is never formed:

    - **labeled**: (A₁ ⊗ A₂) vec(V) = vec(A₁ V A₂ᵀ) for V of shape (n₁, n₂), and the label
      match is a mask M_{uv} = [ℓ(u) = ℓ(v)], so A×V = M ∘ (A₁ (M ∘ V) A₂ᵀ). Graphs are
      sorted by size and padded to the largest of their block; all pairs of two blocks
      go through one batched product per step. The geometric kind solves
      (I − λA×)x = M by conjugate gradients, one column per pair (relative residual
      ``tol``; a ConvergenceWarning says when it stops short). For directed graphs
      (I − λA× not symmetric), the exponential and the truncated kinds, the series is
      summed term by term (terms ≥ 0) until a term is below ``tol`` times the sum.
    - **edge labels**: A×V = M ∘ Σ_c A₁⁽ᶜ⁾ (M ∘ V) A₂⁽ᶜ⁾ᵀ, the labeled path with C
      batched products per step (C edge labels); also with ``labeled=False``.
    - **unlabeled** (or a single label in all), without edge labels: A×^k = A₁^k ⊗ A₂^k, so
      1ᵀA×^k 1 = w_k(G₁) w_k(G₂) with w_k(G) = 1ᵀA^k 1 the number of walks of length k,
      and k(G₁, G₂) = Σ_k c_k w_k(G₁) w_k(G₂): a features kernel with
      φ_k(G) = √c_k w_k(G), the walk counts found by k sparse products on all graphs at
      once. The series is cut after K terms where its tail is provably below ``tol``
      relative to the value (abs(w_k) ≤ n‖A‖₂^k): K ≈ log(tol(1 − q))/log q for q =
      λ max‖A₁‖₂ max‖A₂‖₂ (= λρ₁ρ₂ for undirected graphs).

    Parameters
    ----------
    lam : float
        Decay λ > 0.
    kind : {"geometric", "exponential"}
    p : int, optional
        Number of steps of the truncated kernel.
    labeled : bool
        Walks must match node labels (the label-matched product graph).
    edge_labels : bool
        Walks must also match edge labels (each distinct row of ``edge_attr`` is one
        label): the product graph has an edge (u, v) → (u', v') only when u → u' and
        v → v' carry the same label, A× = Σ_c A₁⁽ᶜ⁾ ⊗ A₂⁽ᶜ⁾ (Gärtner et al., 2003; one
        adjacency matrix A⁽ᶜ⁾ per edge label c). Every graph then needs ``edge_attr``.
    normalize : bool
        Cosine normalization, applied lazily.
    tol : float
        Relative tolerance of the solves and series, in (0, 1) (default 1e-12).
    max_iter : int
        Cap on CG iterations and series terms.

    Raises
    ------
    ValueError
        For the geometric kind without ``p`` when λ ≥ 1/(max ρ(A₁) · max ρ(A₂)) over the
        graphs given: the message names that largest admissible λ. λ is never lowered
        silently (GraKeL lowers it). With edge labels the same bound is used: it is
        sufficient (A× ≤ A₁ ⊗ A₂ entrywise, so ρ(A×) ≤ ρ(A₁)ρ(A₂)), not necessary.
    ValueError
        Up front, when the dense tables exceed the device's memory: 8n² bytes for the
        adjacency matrix of the largest graph with an edge (n nodes; its spectral radius
        is found from it), and for the labeled kernel 8n₁n₂ bytes for the product of the
        largest graphs of X and Y. The message gives the bytes.

    Notes
    -----
    Cost, labeled: per pair of graphs with n₁, n₂ nodes, O(n₁n₂(n₁ + n₂)) per CG
    iteration or series term, about log(1/tol)/log(1/(λρ₁ρ₂)) iterations; the n·m values
    are inherently pairwise, returned as a dense KernelMatrix computed block by block
    (O(block) memory besides the n × m result). Unlabeled: O(K(N + E)) for the features
    of N nodes and E edges, then a rank-(K + 1) features KernelMatrix. Plus one batched
    eigenvalue problem per graph (ρ, for the check on λ).

    References
    ----------
    T. Gärtner, P. Flach and S. Wrobel, "On graph kernels: hardness results and efficient
    alternatives", COLT (2003). S. V. N. Vishwanathan, N. N. Schraudolph, R. Kondor and
    K. M. Borgwardt, "Graph kernels", JMLR 11:1201–1242 (2010), Sec. 4 (the Sylvester /
    conjugate-gradient computation on the product graph).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import RandomWalk
    >>> edge = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    >>> round(float(RandomWalk(0.1, labeled=False)([edge]).to_dense()), 12)  # 4/(1 − 0.1)
    4.444444444444
    """

    _graph_fields = ("nodes", "edges")  # a list of Data: no node attributes read
    _pair_local = True  # k(G, G') depends on G and G' only (pairs: in batches)

    def __init__(self, lam: float, kind: str = "geometric", p: int | None = None,
                 labeled: bool = True, normalize: bool = False, tol: float = 1e-12,
                 max_iter: int = 1000, edge_labels: bool = False):
        super().__init__()
        if not (is_real(lam) or (isinstance(lam, torch.Tensor) and lam.numel() == 1
                                 and not lam.dtype.is_complex and lam.dtype != torch.bool)):
            raise TypeError(f"lam must be a real number (the walk weight), got {lam!r}")
        lam = float(lam)
        if not (math.isfinite(lam) and lam > 0):
            raise ValueError(f"lam must be finite and > 0, got {lam!r}")
        if kind not in ("geometric", "exponential"):
            raise ValueError(f"kind must be 'geometric' or 'exponential', got {kind!r}")
        if p is not None and (not is_int(p) or p < 0):
            raise ValueError(f"p must be None or a non-negative int, got {p!r}")
        if not is_real(tol) or not 0 < tol < 1:  # tol ≥ 1 would cut the series at 0 terms
            raise ValueError(f"tol must be a real number in (0, 1) (the relative accuracy of "
                             f"the series), got {tol!r}")
        if not is_int(max_iter) or max_iter < 1:
            raise ValueError(f"max_iter must be a positive int, got {max_iter!r}")
        labeled = check_bool(labeled, "labeled")
        edge_labels = check_bool(edge_labels, "edge_labels")
        self.lam, self.kind, self.p, self.labeled = lam, kind, p, labeled
        self.edge_labels = edge_labels
        self.normalize = check_bool(normalize, "normalize")
        self.tol, self.max_iter = float(tol), max_iter

    def extra_repr(self) -> str:
        return (f"lam={self.lam:g}, kind={self.kind!r}, p={self.p}, labeled={self.labeled}, "
                f"edge_labels={self.edge_labels}, "
                f"normalize={self.normalize}")

    @property
    def _infinite_geometric(self) -> bool:
        return self.kind == "geometric" and self.p is None

    def _check_lam(self, rho_x: float, rho_y: float) -> None:
        if not self._infinite_geometric or rho_x * rho_y == 0:
            return
        limit = 1.0 / (rho_x * rho_y)
        if self.lam >= limit:
            raise ValueError(
                f"lam={self.lam:g} is too large for the geometric random walk kernel on these "
                f"graphs: Σ λ^k A×^k converges only for λ < 1/(ρ(A₁)ρ(A₂)), and the largest "
                f"spectral radii here are {rho_x:.6g} and {rho_y:.6g}, so lam must be "
                f"< {limit:.6g}. Pass a smaller lam, or p=<int> for the truncated kernel.")

    # -- sizes ---------------------------------------------------------------------------
    def _check_size(self, X: GraphSet, name: str) -> None:
        with_edges = X.num_nodes[X.num_edges > 0]
        if with_edges.numel() == 0:
            return
        n = int(with_edges.max())
        check_memory(8 * n * n, f"{name}: RandomWalk on a graph of {n:,} nodes finds the "
                     f"spectral radius of its adjacency matrix from the dense (n, n) float64 "
                     f"matrix, which", X.device)

    def _check_product_size(self, X: GraphSet, Y: GraphSet) -> None:
        """The labeled product graph of the largest graphs of X and Y, (n₁, n₂) float64."""
        n1, n2 = int(X.num_nodes.max()), int(Y.num_nodes.max())
        check_memory(8 * n1 * n2, f"X and Y: RandomWalk on the label-matched product of graphs "
                     f"of {n1:,} and {n2:,} nodes holds (n₁, n₂) float64 tables, which",
                     X.device)

    # -- kernel ----------------------------------------------------------------------------
    def _finite(self, T: torch.Tensor) -> torch.Tensor:
        """``T`` (walk features' squared norms, or kernel values), refused when an entry
        overflowed its dtype (a large ``lam``, ``p`` or ``kind="exponential"``)."""
        return check_range(T, T.dtype, lambda _: (  # the dtype named: float32 sets said float64
            f"lam={self.lam:g}: the {self.kind} random-walk series (p={self.p}) overflows "
            f"{str(T.dtype)[6:]} on these graphs (λ^k times the walk counts); take a smaller "
            f"lam" + ("" if self.p is None else " or p")))

    def _gram(self, X: GraphSet, Y: GraphSet | None):
        self._check_pair(X, Y)
        features = not self.edge_labels and (not self.labeled or _single_label(X, Y))
        if not features:
            self._check_product_size(X, X if Y is None else Y)
        (rx, nx), (ry, ny) = _spectra(X), _spectra(X if Y is None else Y)
        self._check_lam(rx, ry)
        if features:
            K = self._n_terms(nx, ny)
            phi_x = walk_counts(X, self._step_scales(K))
            phi_y = None if Y is None else walk_counts(Y, self._step_scales(K))
            for phi in (phi_x, phi_y):  # finite squared norms: every ⟨φ, φ'⟩ finite too
                if phi is not None:
                    self._finite((phi * phi).sum(1))
            return FeatureKernelMatrix(phi_x, phi_y)
        sides = [X] if Y is None else [X, Y]
        nodes, edges = self._labels(sides)
        if Y is None:
            return DenseKernelMatrix(self._finite(self._pairwise(
                X, nodes[0], X, nodes[0], True, None if edges is None else edges * 2)))
        return DenseKernelMatrix(self._finite(self._pairwise(X, nodes[0], Y, nodes[1], False,
                                                             edges)))

    def _diag(self, X: GraphSet) -> torch.Tensor:
        features = not self.edge_labels and (not self.labeled or _single_label(X, None))
        if not features:
            self._check_product_size(X, X)
        r, n = _spectra(X)
        self._check_lam(r, r)
        if features:
            phi = walk_counts(X, self._step_scales(self._n_terms(n, n)))
            return self._finite((phi * phi).sum(1))
        (labels,), edges = self._labels([X])
        edges = None if edges is None else edges[0]
        C = 1 if edges is None else max(1, edges[1])  # C = 0: no graph has an edge
        d = torch.zeros(len(X), dtype=X.dtype, device=X.device)
        for g, n in X.size_chunks(_PRODUCT_BUDGET // C, power=2):
            A, L = _block(X, labels, g, n, -1, edges)
            d[g] = self._walk_sums(A, A, L, torch.where(L < 0, -2, L)).to(d.dtype)
        return self._finite(d)

    def _pairs(self, X: GraphSet, Y: GraphSet) -> torch.Tensor:
        """k(x_i, y_i): the walk counts' row-wise products (unlabeled), else one product
        graph per pair, pairs of similar size solved together — n systems, not n²."""
        if not self.edge_labels and (not self.labeled or _single_label(X, Y)):
            return self(X, Y).diag()  # features: O(n) already
        self._check_pair(X, Y)
        self._check_product_size(X, Y)
        self._check_lam(_spectra(X)[0], _spectra(Y)[0])
        nodes, edges = self._labels([X, Y])
        ex, ey = (None, None) if edges is None else edges
        C = 1 if ex is None else max(1, ex[1])
        nx, ny = X.num_nodes.clamp_min(1), Y.num_nodes.clamp_min(1)
        order = torch.argsort(nx * (int(ny.max()) + 1) + ny, stable=True)  # by (n_x, n_y)
        out = torch.zeros(len(X), dtype=torch.float64, device=X.device)
        i = 0
        while i < order.numel():
            # a batch is padded to its largest n_x times its largest n_y: with pairs sorted
            # by n_x, the padded size of the first k pairs is k n_x(k) max_{≤k} n_y,
            # nondecreasing in k, kept within the budget
            rest = order[i:]
            cost = torch.arange(1, rest.numel() + 1, device=X.device) * nx[rest] \
                * torch.cummax(ny[rest], 0).values
            j = i + max(1, int((cost <= _PRODUCT_BUDGET // C).sum()))
            g = order[i:j]
            Ax, Lx = _block(X, nodes[0], g, int(X.num_nodes[g].max()), -1, ex)
            Ay, Ly = _block(Y, nodes[1], g, int(Y.num_nodes[g].max()), -2, ey)
            out[g] = self._walk_sums(Ax, Ay, Lx, Ly)
            i = j
        out = self._finite(out.to(X.dtype))
        if self.normalize:
            out = out * _inv_sqrt(self._diag(X)) * _inv_sqrt(self._diag(Y))
        return out

    def _labels(self, sides):
        """Node label ids of every set in ``sides`` in one dictionary (all 0 when
        ``labeled=False``), and ``(edge label ids, C)`` per set (or None) for
        ``edge_labels=True`` — the edge labels of all sets in one dictionary too."""
        if self.labeled:
            nodes, _ = unify_labels([(G.node_label, G.label_values) for G in sides])
        else:
            nodes = [torch.zeros_like(G.node_label) for G in sides]
        if not self.edge_labels:
            return nodes, None
        for name, G in zip("XY", sides):
            if G.edge_label is None:
                raise ValueError(f"{name}: edge_labels=True needs edge labels: give every "
                                 f"graph edge_attr (one row per edge)")
        ids, values = unify_labels([(G.edge_label, G.edge_label_values) for G in sides])
        return nodes, tuple((i, values.shape[0]) for i in ids)

    # -- unlabeled: walk counts ----------------------------------------------------------
    def _step_scales(self, K: int):
        """√(c_k / c_{k−1}) for k = 1..K, so that φ_k = √c_k w_k."""
        if self.kind == "geometric":
            return [math.sqrt(self.lam)] * K
        return [math.sqrt(self.lam / k) for k in range(1, K + 1)]

    def _n_terms(self, norm_x: float, norm_y: float) -> int:
        """Terms after which the series' tail is below tol relative to the value."""
        if self.p is not None:
            return self.p
        q = self.lam * norm_x * norm_y
        if q == 0:
            return 0
        if self.kind == "geometric":
            if q >= 1:  # directed graphs only (ρ < ‖A‖₂): no a-priori bound
                K = self.max_iter
            else:
                K = max(0, math.ceil(math.log(self.tol * (1 - q)) / math.log(q)) - 1)
        else:  # Taylor remainder e^q q^{K+1}/(K+1)!
            K, log_rem = 0, q + math.log(q)
            while log_rem > math.log(self.tol) and K < self.max_iter:
                K += 1
                log_rem += math.log(q) - math.log(K + 1)
        if K >= self.max_iter:
            warnings.warn(f"the {self.kind} random-walk series needs more than max_iter="
                          f"{self.max_iter} terms to reach tol={self.tol:.1e} (λ‖A₁‖‖A₂‖ = "
                          f"{q:.4g}); cut at max_iter", ConvergenceWarning, stacklevel=4)
            K = self.max_iter
        return K

    # -- labeled: pairs on the product graph ---------------------------------------------
    def _pairwise(self, X, lx, Y, ly, sym: bool, edges=None) -> torch.Tensor:
        """K[i, j] for all pairs, by blocks of graphs of similar size; ``edges``: (edge
        label ids, C) of X and of Y, or None."""
        K = torch.zeros(len(X), len(Y), dtype=X.dtype, device=X.device)
        ex, ey = (None, None) if edges is None else edges
        # C edge labels per step; C = 0 when no graph of the set has an edge
        side = int(math.sqrt(_PRODUCT_BUDGET // (1 if ex is None else max(1, ex[1]))))
        xblocks = list(X.size_chunks(side, power=1))
        yblocks = xblocks if sym else list(Y.size_chunks(side, power=1))
        for I, (gx, nx) in enumerate(xblocks):
            Ax, Lx = _block(X, lx, gx, nx, -1, ex)
            for J, (gy, ny) in enumerate(yblocks):
                if sym and J < I:
                    continue
                Ay, Ly = _block(Y, ly, gy, ny, -2, ey)
                a, b = torch.meshgrid(torch.arange(len(gx), device=X.device),
                                      torch.arange(len(gy), device=X.device), indexing="ij")
                a, b = a.reshape(-1), b.reshape(-1)
                if sym and I == J:
                    a, b = a[a <= b], b[a <= b]
                vals = self._walk_sums(Ax[a], Ay[b], Lx[a], Ly[b]).to(K.dtype)
                K[gx[a], gy[b]] = vals
                if sym:
                    K[gy[b], gx[a]] = vals
        return K

    def _walk_sums(self, A1, A2, L1, L2) -> torch.Tensor:
        """The kernel values of P graph pairs: A1 (P, n₁, n₁), A2 (P, n₂, n₂), node labels
        L1 (P, n₁), L2 (P, n₂) with distinct negative padding values."""
        M = (L1[:, :, None] == L2[:, None, :]).to(A1.dtype)
        if M.numel() == 0:
            return M.new_zeros(M.shape[0])
        system = _ProductSystem(A1, A2, M, self.lam)
        symmetric = (bool((A1 == A1.transpose(-1, -2)).all())
                     and bool((A2 == A2.transpose(-1, -2)).all()))
        if self._infinite_geometric and symmetric:
            # Columns are pairs; memory stays pair-major (the transpose is a view), so
            # CG's column reductions run over contiguous memory.
            with torch.no_grad():
                x = cg(system, M.reshape(M.shape[0], -1).T, tol=self.tol, max_iter=self.max_iter)
            return x.sum(0)
        return self._series(system, M)

    def _series(self, system: _ProductSystem, M) -> torch.Tensor:
        """Σ_k c_k 1ᵀA×^k 1 with c_k = λ^k (geometric) or λ^k/k! (exponential), up to
        k = p, or until every pair's term is below tol times its sum."""
        term, total = M, M.sum((1, 2))
        n_terms = self.p if self.p is not None else self.max_iter
        s = total
        for k in range(1, n_terms + 1):
            c = self.lam if self.kind == "geometric" else self.lam / k
            term = c * system.walk(term)
            s = term.sum((1, 2))
            total = total + s
            if self.p is None and bool((s <= self.tol * total).all()):
                return total
        if self.p is None:
            worst = float((s / total.clamp_min(torch.finfo(total.dtype).tiny)).max())
            warnings.warn(f"the {self.kind} random-walk series did not converge in "
                          f"{self.max_iter} terms (last term / sum up to {worst:.3e} > "
                          f"tol={self.tol:.1e}); raise max_iter or lower lam",
                          ConvergenceWarning, stacklevel=4)
        return total


def walk_counts(G: GraphSet, scales) -> torch.Tensor:
    """φ_k(G) = s_1⋯s_k · 1ᵀA^k 1 for k = 0..len(scales), every graph at once: shape
    (n_graphs, len(scales) + 1). One pass over the edges per k (v ← s_k A v on all nodes,
    then a sum per graph); scaling as it goes keeps the counts from overflowing."""
    gon = G.graph_of_node
    src, dst = G.edge_index
    f64 = torch.float64  # summed in float64 whatever the set's dtype
    v = torch.ones(int(G.ptr[-1]), dtype=f64, device=G.device)
    cols = [G.num_nodes.to(f64)]
    for s in scales:
        v = torch.zeros_like(v).index_add_(0, src, v[dst]) * s
        cols.append(torch.zeros(len(G), dtype=f64, device=G.device).index_add_(0, gon, v))
    return torch.stack(cols, 1).to(G.dtype)


def _single_label(X: GraphSet, Y: GraphSet | None) -> bool:
    """Whether all nodes of X (and Y) carry one label: then labeled = unlabeled walks."""
    if Y is None:
        return torch.unique(X.node_label).numel() <= 1
    (lx, ly), _ = unify_labels([(X.node_label, X.label_values), (Y.node_label, Y.label_values)])
    return torch.unique(torch.cat([lx, ly])).numel() <= 1


def _block(G: GraphSet, labels, gids, n, pad, edges=None):
    """Dense adjacency (B, n, n) of the graphs ``gids`` — (B, C, n, n), one matrix per
    edge label, with ``edges`` = (edge label ids, C) — and their node labels (B, n),
    ``pad`` past each graph's last node."""
    nodes = G.padded_nodes(gids, n)
    L = torch.where(nodes >= 0, labels[nodes.clamp_min(0)], pad)
    el, C = (None, 1) if edges is None else edges
    return G.dense_adjacency(gids, n, torch.float64, el, C), L  # float64 for any dtype


def _spectra(G: GraphSet):
    """(max ρ(A), max ‖A‖₂) over the graphs of G (0.0 without edges).

    Undirected graphs: a few power steps with A + I on all graphs at once bracket every
    ρ(A) — below by the Rayleigh quotient xᵀAx/xᵀx, above by max_i (Ax)_i/x_i for the
    positive iterate x (Collatz–Wielandt: ρ(A) = ρ(D⁻¹AD) ≤ ‖D⁻¹AD‖∞, D = diag(x)) —
    and the exact ``eigvalsh`` runs only on the graphs whose upper bound reaches the
    largest lower bound (usually a handful). Directed graphs (ρ < ‖A‖₂ possible): exact
    ``eigvals`` and ``matrix_norm`` on all of them.
    """
    if int(G.eptr[-1]) == 0:
        return 0.0, 0.0
    src, dst = G.edge_index
    if not _is_symmetric(G):
        return _exact_spectra(G, directed=True)
    gon, n = G.graph_of_node, len(G)
    x = torch.ones(gon.numel(), dtype=torch.float64, device=G.device)
    for _ in range(30):
        x = x + torch.zeros_like(x).index_add_(0, src, x[dst])  # (A + I) x
        x = x / torch.zeros(n, dtype=x.dtype, device=x.device).scatter_reduce_(
            0, gon, x, "amax", include_self=False)[gon]
    Ax = torch.zeros_like(x).index_add_(0, src, x[dst])
    zeros = torch.zeros(n, dtype=x.dtype, device=x.device)
    lo = zeros.index_add(0, gon, x * Ax) / zeros.index_add(0, gon, x * x).clamp_min(1e-300)
    hi = zeros.scatter_reduce(0, gon, Ax / x, "amax", include_self=False)
    candidates = torch.nonzero(hi >= lo.max() * (1 - 1e-9)).reshape(-1)
    return _exact_spectra(G.take(candidates), directed=False)


def _is_symmetric(G: GraphSet) -> bool:
    src, dst = G.edge_index
    N = max(int(G.ptr[-1]), 1)
    fwd, _ = torch.sort(src * N + dst)
    bwd, _ = torch.sort(dst * N + src)
    return bool(torch.equal(fwd, bwd))


def _exact_spectra(G: GraphSet, directed: bool):
    """(max ρ(A), max ‖A‖₂) by dense batched eigenvalue problems, groups of similar size."""
    rho = norm = 0.0
    for g, n in G.size_chunks(2 ** 22, power=3):
        if n == 0:
            continue
        A = G.dense_adjacency(g, n, torch.float64)
        if directed:
            rho = max(rho, float(torch.linalg.eigvals(A).abs().max()))
            norm = max(norm, float(torch.linalg.matrix_norm(A, 2).max()))
        else:
            r = float(torch.linalg.eigvalsh(A).abs().max())
            rho, norm = max(rho, r), max(norm, r)
    return rho, norm
