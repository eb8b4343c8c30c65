"""Spectral clustering on a lazy affinity matrix (Ng, Jordan and Weiss, 2002)."""
from __future__ import annotations

import warnings

import torch
from sklearn.base import ClusterMixin

from .._estimator import Estimator, is_precomputed, kernel_matrix, resolve_kernel
from ..inputs import check_input, check_precomputed, n_features
from ..gram import DenseKernelMatrix, FeatureKernelMatrix, OperatorKernelMatrix
from ..linalg import ConvergenceWarning, eigsh
from ..linalg.eig import block_krylov_eigsh, _ritz_residual
from .._validation import check_bool
from ._common import check_int
from .kmeans import _kernel_kmeans

__all__ = ["SpectralClustering"]

_LANCZOS_MAX_N = 1000


def _spectral_operator(K, normalized):
    """The matrix whose top eigenvectors embed the points, as an operator on K's products
    (a stored K is not copied: no second n × n matrix).

    normalized: :math:`D^{-1/2}KD^{-1/2}`, applied as d^{-1/2} ⊙ K(d^{-1/2} ⊙ V).
    unnormalized: :math:`cI - L = cI - D + K` with c = 2 max d ≥ λ_max(L) (Gershgorin),
    whose top eigenvectors are the bottom eigenvectors of the Laplacian L = D − K.
    """
    low = float(K.tensor.min()) if isinstance(K, DenseKernelMatrix) else 0.0
    if low < 0:
        # a stored matrix is checked entry by entry (lazy ones only through their degrees,
        # which would cost another pass over the entries)
        raise ValueError(f"the affinity matrix has negative entries (min "
                         f"{low:.3g}); spectral clustering needs a "
                         f"nonnegative affinity (a kernel with values >= 0, e.g. RBF)")
    d = K.sum(1)
    if not bool((d >= 0).all()):
        raise ValueError("the affinity matrix has rows with negative sums; spectral "
                         "clustering needs a nonnegative affinity")
    n = K.shape[0]
    if normalized:
        # an isolated point (a zero row of a sparse affinity) gets degree 1, as SciPy's
        # normalized Laplacian (scikit-learn's) gives it: its row of the operator stays 0
        s = torch.where(d > 0, d, torch.ones_like(d)).rsqrt()[:, None]
        return OperatorKernelMatrix(lambda V: s * (K @ (s * V)), (n, n), K.dtype, K.device)
    c = 2 * d.max()
    return OperatorKernelMatrix(lambda V: K @ V + (c - d)[:, None] * V, (n, n), K.dtype,
                                K.device)


class SpectralClustering(ClusterMixin, Estimator):
    r"""Spectral clustering with a kernel affinity (Ng, Jordan and Weiss, 2002).

    With ``normalized=True``: the top-k eigenvectors :math:`U \in \mathbb R^{n\times k}`
    of the normalized affinity :math:`D^{-1/2}KD^{-1/2}` (D = diag(K1)), rows normalized
    to unit length, clustered by k-means. This is the relaxation of the normalized cut
    (Shi and Malik 2000; Dhillon, Guan and Kulis 2004, "Kernel k-means, spectral
    clustering and normalized cuts", KDD). With
    ``normalized=False``: the bottom-k eigenvectors of the Laplacian L = D − K (ratio
    cut), without row normalization.

    The eigenvectors come from :func:`torchkern.linalg.eigsh` (Lanczos) for n ≤ 1000 and
    from randomized block Krylov iteration above (Halko, Martinsson and Tropp 2011; one
    product with a block of ≥ 24 vectors per step), on a lazy operator whose product is
    :math:`d^{-1/2}\odot K(d^{-1/2}\odot V)` — the affinity matrix is never stored on
    the lazy backends. The k-means rounding is
    :class:`KernelKMeans`'s Lloyd iteration on the explicit n × k embedding (k-means++,
    ``n_init`` restarts).

    Parameters
    ----------
    kernel : Kernel, "precomputed" or None
        The affinity; default ``RBF()``. With ``"precomputed"``, ``fit`` takes the
        nonnegative (n, n) affinity matrix (tensor, array or KernelMatrix).
    n_clusters : int
    normalized : bool
    n_init : int
        k-means restarts.
    backend : str or None
        Gram-matrix backend (``None`` = ``torchkern.config``).
    random_state : None, int or torch.Generator
        Eigensolver start vectors and k-means seeding.
    verbose : bool
        Show progress bars (tqdm, kept on screen): the eigensolver's digits of relative
        residual gained toward its tolerance by the worst of the k eigenpairs, then the
        k-means initializations.

    Attributes
    ----------
    labels_ : IntTensor (n,)
        int32, as scikit-learn's (k-means assignment).
    embedding_ : Tensor (n, k)
        The (row-normalized, if ``normalized``) spectral embedding.
    eigenvalues_ : Tensor (k,)
        Eigenvalues of D^{-1/2}KD^{-1/2} (normalized) or of L (unnormalized).

    Notes
    -----
    Cost: s products with K (O(s n² d) kernel evaluations lazily, O(n k) memory beyond
    the Krylov basis) plus k-means on n × k, O(n k²) per iteration.

    Examples
    --------
    >>> import torch, torchkern
    >>> X = torch.randn(100, 2, dtype=torch.float64)
    >>> sc = torchkern.SpectralClustering(torchkern.RBF(0.5), n_clusters=2, random_state=0)
    >>> sc.fit(X).labels_.shape
    torch.Size([100])
    """

    def __init__(self, kernel=None, n_clusters=8, *, normalized=True, n_init=10,
                 backend=None, random_state=None, verbose=False):
        self.kernel = kernel
        self.n_clusters = n_clusters
        self.normalized = normalized
        self.n_init = n_init
        self.backend = backend
        self.random_state = random_state
        self.verbose = verbose

    @torch.no_grad()
    def fit(self, X, y=None):
        """Cluster X (n, d) (or the affinity matrix with ``"precomputed"``)."""
        kernel = resolve_kernel(self.kernel)
        X = check_precomputed(X, square=True) if is_precomputed(kernel) else check_input(kernel, X)
        if isinstance(X, torch.Tensor) and X.dtype in (torch.float16, torch.bfloat16):
            X = X.float()  # the eigensolvers work in float32 or float64
        K = kernel_matrix(kernel, X, backend=self.backend, reuse=True)
        n = K.shape[0]
        k = check_int(self.n_clusters, "n_clusters", 1, n)
        check_int(self.n_init, "n_init")
        check_bool(self.normalized, "normalized")
        with torch.no_grad():
            A = _spectral_operator(K, self.normalized)
            evals, U = self._embedding(A, k)
            U = U.to(torch.float64)
            if self.normalized:
                U = U / U.norm(dim=1, keepdim=True).clamp_min(torch.finfo(U.dtype).tiny)
                self.eigenvalues_ = evals
            else:
                self.eigenvalues_ = 2 * K.sum(1).max() - evals
            labels, *_ = _kernel_kmeans(FeatureKernelMatrix(U), k, n_init=self.n_init,
                                        max_iter=300, tol=0.0, random_state=self.random_state,
                                        verbose="SpectralClustering (k-means)" if self.verbose
                                        else False)
        self.kernel_ = kernel
        self.embedding_ = U.to(K.dtype)
        self.labels_ = labels.to(torch.int32)  # scikit-learn's (assign_labels="kmeans")
        self.__dict__.pop("n_features_in_", None)  # a refit on graphs has none
        d = n if is_precomputed(kernel) else n_features(X)  # scikit-learn's: n if precomputed
        if d is not None:
            self.n_features_in_ = d
        return self

    def _embedding(self, A, k):
        """Top-k eigenpairs of the spectral operator A: Lanczos up to n = 1000, block
        Krylov above (one block product per step: several times fewer passes over the
        affinity matrix)."""
        n = A.shape[0]
        if n <= _LANCZOS_MAX_N:
            return eigsh(A, k, random_state=self.random_state,
                         verbose="SpectralClustering (Lanczos)" if self.verbose else False)
        evals, U, ok, steps = block_krylov_eigsh(
            A, k, random_state=self.random_state,
            verbose="SpectralClustering (block Krylov)" if self.verbose else False)
        if not ok:
            res = _ritz_residual(A, evals, U)
            warnings.warn(f"SpectralClustering: the eigensolver did not reach its tolerance "
                          f"in {steps} block products: largest relative residual {res:.3e}",
                          ConvergenceWarning, stacklevel=3)
        return evals.to(A.dtype), U.to(A.dtype)

    def fit_predict(self, X, y=None):
        """Fit and return ``labels_``."""
        return self.fit(X).labels_
