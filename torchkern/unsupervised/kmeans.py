"""Kernel k-means: Lloyd iterations in feature space through products K @ Z."""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from sklearn.base import ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin

from .._estimator import Estimator, check_fitted, is_precomputed, kernel_matrix, resolve_kernel
from ..inputs import check_fitted_input, check_input, check_precomputed, n_features
from .._validation import check_positive, check_sample_weight
from ..linalg import ConvergenceWarning
from ._common import cheap_trace, check_int, generator, total, warn_if_centering_cancels

__all__ = ["KernelKMeans"]


# --------------------------------------------------------------------------------------
# The algorithm, on any square KernelMatrix (lazy, dense or explicit features)
# --------------------------------------------------------------------------------------

def _normalized_indicator(labels, k, dtype, weights=None):
    """Z with Z_ic = w_i / Σ_{l∈C_c} w_l if i ∈ C_c (n × k; w = 1 without weights), and
    the clusters' masses Σ_{l∈C_c} w_l (their sizes without weights)."""
    n = labels.shape[0]
    Z = torch.zeros(n, k, dtype=dtype, device=labels.device)
    Z[torch.arange(n, device=labels.device), labels] = 1 if weights is None else weights.to(dtype)
    mass = Z.sum(0)
    return Z / torch.where(mass > 0, mass, torch.ones_like(mass)), mass


def _distances(K, diag, labels, k, weights=None):
    r"""Squared feature-space distances of every point to every cluster mean (n × k):
    :math:`K_{ii} - \frac{2}{|C|}\sum_{l\in C}K_{il} + \frac{1}{|C|^2}\sum_{l,l'\in C}K_{ll'}`
    by one product K Z (Girolami 2002; Dhillon, Guan and Kulis 2004) — with sample weights
    the means are weighted, Σ_{l∈C} w_l φ(x_l) / Σ_{l∈C} w_l (their weighted kernel
    k-means). Clusters of no (or zero) mass are at distance +inf. Returns (D, Z, s) with
    s_c the last term."""
    Z, mass = _normalized_indicator(labels, k, K.dtype, weights)
    KZ = K @ Z
    s = (Z * KZ).sum(0)
    D = (diag[:, None] - 2 * KZ + s[None, :]).clamp_min(0)
    D[:, mass == 0] = math.inf
    return D, Z, s


def _inertia(D, labels, weights=None):
    """Σ_i w_i ‖φ(x_i) − m_{label_i}‖² (w = 1 without weights)."""
    d = D.gather(1, labels[:, None])[:, 0]
    return float(d.sum() if weights is None else (weights.to(d.dtype) * d).sum())


def _point_distances(K, diag, idx):
    """Squared distances of every point to the points ``idx`` (n × len(idx)), from rows."""
    R = K.rows(idx).T  # (n, c)
    return (diag[:, None] - 2 * R + diag[idx][None, :]).clamp_min(0)


def _kmeans_plusplus(K, diag, k, gen, weights=None):
    """Greedy k-means++ seeding in feature space (Arthur & Vassilvitskii 2007): each new
    center is the best of 2 + ⌊ln k⌋ candidates drawn ∝ D², as scikit-learn does (with
    sample weights: the first center drawn ∝ w, the next ∝ w·D², the best candidate the
    one of least weighted potential Σ w D²). Needs k·(2 + ln k) rows of K: O(n k log k)
    kernel evaluations."""
    n = K.shape[0]
    trials = 2 + int(math.log(k))
    wc = None if weights is None else weights.detach().to("cpu", torch.float64)
    if wc is None:
        first = int(torch.randint(n, (1,), generator=gen))
    else:
        first = int(torch.multinomial(wc, 1, generator=gen))
    centers = [first]
    d2 = _point_distances(K, diag, torch.tensor([first], device=diag.device))[:, 0]
    for _ in range(1, k):
        w = d2.detach().to("cpu", torch.float64)
        if wc is not None:
            w = w * wc
        if float(w.sum()) <= 0:  # every point coincides with a center: pick uniformly
            w = torch.ones(n, dtype=torch.float64) if wc is None else wc.clone()
        cand = torch.multinomial(w, trials, replacement=True, generator=gen).to(diag.device)
        Dc = torch.minimum(d2[:, None], _point_distances(K, diag, cand))
        pot = Dc if weights is None else Dc * weights.to(Dc.dtype)[:, None]
        best = int(pot.sum(0).argmin())
        centers.append(int(cand[best]))
        d2 = Dc[:, best]
    return torch.tensor(centers, device=diag.device)


def _labels_from_centers(K, diag, idx, weights=None):
    """The assignment to the initial centers ``idx``, its empty clusters (coinciding
    centers) relocated w.r.t. those centers — scikit-learn's first iteration, which
    relocates before its first means (without it, max_iter=1 kept the empty cluster)."""
    D = _point_distances(K, diag, idx)
    return _relocate_empty(D, D.argmin(1), idx.numel(), weights)


def _relocate_empty(D, labels, k, weights=None):
    """Give each empty cluster the point farthest from its own cluster (sklearn's rule).
    With sample weights only points of positive weight move: a cluster of zero mass has
    no mean (its distances are +inf), so a zero-weight point would leave it empty."""
    counts = torch.bincount(labels, minlength=k)
    empty = (counts == 0).nonzero().flatten().tolist()
    if not empty:
        return labels
    labels = labels.clone()
    own = D.gather(1, labels[:, None])[:, 0].clone()
    if weights is not None:
        own[weights <= 0] = -math.inf
    for c in empty:
        counts = torch.bincount(labels, minlength=k)
        movable = counts[labels] > 1
        own[~movable] = -math.inf
        i = int(own.argmax())
        if own[i] == -math.inf:  # no point can move: every cluster left holds one point
            break
        labels[i] = c
        own[i] = -math.inf
    return labels


def _lloyd(K, diag, labels, k, max_iter, tol, weights=None):
    """Lloyd iterations from ``labels`` (the assignment to the initial centers, which
    counts as the first of ``max_iter``, as in scikit-learn). Stops when the labels no
    longer change or the inertia decreased by at most ``tol`` (relative). Returns the
    final labels, the inertia with respect to the cluster means that produced them, those
    means (as the weights Z and squared norms s), the number of iterations and whether
    they converged (False: stopped by ``max_iter``). One product K Z per iteration.

    An empty cluster gets a point (:func:`_relocate_empty`); where the data hold fewer
    distinct points (of positive weight) than clusters, the next assignment empties it
    again — the moved point ties with its duplicates' cluster — and the relocated
    labellings repeat. A labelling met twice after a relocation is such a cycle: the
    iteration stops there, converged, with the empty clusters (as scikit-learn's KMeans,
    which then warns that fewer distinct clusters than ``n_clusters`` were found)."""
    prev = math.inf
    seen = set()
    # Counted as scikit-learn's KMeans counts: the assignment ``labels`` to the initial
    # centers is iteration 1, and the iteration whose assignment changes nothing counts.
    for it in range(2, max_iter + 1):
        D, Z, s = _distances(K, diag, labels, k, weights)
        inertia = _inertia(D, labels, weights)
        new = D.argmin(1)
        fixed = bool((new == labels).all())
        if fixed or (it > 2 and prev - inertia <= tol * prev):
            # labels = argmin w.r.t. the means of the previous labels, as sklearn's final
            # E-step: labels_ and predict() agree, inertia_ is exact for those centers.
            if bool((torch.bincount(new, minlength=k) > 0).all()):
                return new, _inertia(D, new, weights), Z, s, it, True
        labels = _relocate_empty(D, new, k, weights)
        if not bool((labels == new).all()):
            key = labels.cpu().numpy().tobytes()
            if key in seen:
                return new, _inertia(D, new, weights), Z, s, it, True
            seen.add(key)
        prev = inertia
    D, Z, s = _distances(K, diag, labels, k, weights)
    new = D.argmin(1)
    return new, _inertia(D, new, weights), Z, s, max_iter, bool((new == labels).all())


def _kernel_kmeans(K, n_clusters, *, init="k-means++", n_init=10, max_iter=300, tol=1e-4,
                   random_state=None, verbose=False, weights=None):
    """Best of ``n_init`` Lloyd runs on the square KernelMatrix K (lowest inertia).

    ``init``: "k-means++", "random", a LongTensor/array of ``n_clusters`` center indices,
    or a label vector of length n. Returns (labels, inertia, Z, s, n_iter)."""
    n = K.shape[0]
    gen = generator(random_state)
    with torch.no_grad():
        diag = K.diag()
        explicit = not isinstance(init, str)
        runs = range(1 if explicit else n_init)
        if verbose:  # one tick per initialization, kept on screen
            from tqdm.auto import tqdm
            runs = tqdm(runs, desc=verbose if isinstance(verbose, str) else "KernelKMeans",
                        unit="init", leave=True)
        best = None
        for _ in runs:
            if explicit:
                labels = _explicit_init(K, diag, init, n_clusters, weights)
            elif init == "k-means++":
                labels = _labels_from_centers(
                    K, diag, _kmeans_plusplus(K, diag, n_clusters, gen, weights), weights)
            else:
                if weights is None:
                    idx = torch.randperm(n, generator=gen)[:n_clusters]
                else:  # distinct centers drawn ∝ w
                    idx = torch.multinomial(weights.detach().to("cpu", torch.float64),
                                            n_clusters, replacement=False, generator=gen)
                labels = _labels_from_centers(K, diag, idx.to(diag.device), weights)
            out = _lloyd(K, diag, labels, n_clusters, max_iter, tol, weights)
            if best is None or out[1] < best[1]:
                best = out
    found = int(torch.unique(best[0]).numel())
    if found < n_clusters:
        warnings.warn(f"Number of distinct clusters ({found}) found smaller than n_clusters "
                      f"({n_clusters}): fewer distinct points (of positive weight) than "
                      f"clusters, possibly duplicate points", ConvergenceWarning, stacklevel=3)
    if not best[5]:
        warnings.warn(f"kernel k-means did not converge in max_iter={max_iter} Lloyd "
                      f"iterations: the labels still changed and the inertia still fell by "
                      f"more than tol={tol:g} (relative); raise max_iter",
                      ConvergenceWarning, stacklevel=3)
    return best[:5]


def _explicit_init(K, diag, init, k, weights=None):
    n = K.shape[0]
    t = torch.as_tensor(np.asarray(init.cpu() if isinstance(init, torch.Tensor) else init))
    if t.dim() != 1 or t.is_floating_point() and not bool((t == t.round()).all()):
        raise ValueError("init must be 'k-means++', 'random', an integer array of "
                         f"n_clusters={k} center indices, or a label vector of length {n}")
    t = t.long().to(diag.device)
    if t.shape[0] == n:  # a label vector
        if int(t.min()) < 0 or int(t.max()) >= k:
            raise ValueError(f"init labels must lie in [0, {k}), got range "
                             f"[{int(t.min())}, {int(t.max())}]")
        if bool((torch.bincount(t, minlength=k) == 0).any()):  # relocated w.r.t. its means
            t = _relocate_empty(_distances(K, diag, t, k, weights)[0], t, k, weights)
        return t
    if t.shape[0] == k:  # center indices
        if int(t.min()) < 0 or int(t.max()) >= n or t.unique().numel() != k:
            raise ValueError(f"init center indices must be {k} distinct indices in [0, {n})")
        return _labels_from_centers(K, diag, t, weights)
    raise ValueError(f"init array must have length n_clusters={k} (center indices) or "
                     f"n_samples={n} (labels), got {t.shape[0]}")


# --------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------

class KernelKMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, Estimator):
    r"""Kernel k-means: k-means in the feature space of a kernel (Dhillon et al. 2004).

    Minimizes the inertia :math:`\sum_c\sum_{i\in C_c}\lVert\varphi(x_i) -
    \mu_c\rVert^2` with :math:`\mu_c = \frac1{|C_c|}\sum_{l\in C_c}\varphi(x_l)` by
    Lloyd iterations, where the squared distance of a point to a cluster mean is

    .. math:: K_{ii} - \frac{2}{|C|}\sum_{l\in C}K_{il}
              + \frac{1}{|C|^2}\sum_{l,l'\in C}K_{ll'}

    (Girolami 2002, "Mercer kernel-based clustering in feature space", IEEE Trans. Neural
    Netw. 13(3); Dhillon, Guan and Kulis 2004, "Kernel k-means, spectral clustering and
    normalized cuts", KDD). All three terms come from one product :math:`KZ` with the n × k
    normalized indicator matrix :math:`Z_{ic} = [i\in C_c]/|C_c|`: O(n k) memory on the
    lazy backends. Seeding is greedy k-means++ in feature space (distances from single
    rows ``K.rows``). Empty clusters get the point farthest from its own cluster.

    Parameters
    ----------
    kernel : Kernel, "precomputed" or None
        Default ``RBF()``. With ``"precomputed"`` ``fit`` takes the (n, n) Gram matrix
        and ``predict`` the (m, n) Gram matrix of new points against the training points.
    n_clusters : int
    n_init : int
        Restarts; the run with the lowest inertia is kept. Ignored (one run) with an
        explicit ``init``.
    max_iter : int
        Lloyd iterations per run (each one product K Z; the assignment to the initial
        centers is the first, as in scikit-learn's ``KMeans``). A ``ConvergenceWarning``
        says when the best run stopped there before converging.
    tol : float
        Stop when the inertia decreased by at most ``tol`` relative to the previous
        iteration (or when no label changes). ``tol=0`` runs to a fixed point.
    init : "k-means++", "random", array of n_clusters ints, or array of n ints
        Center indices (the initial means are those training points) or an initial
        label vector in [0, n_clusters).
    backend : str or None
        Gram-matrix backend (``None`` = ``torchkern.config``).
    random_state : None, int or torch.Generator
    verbose : bool
        tqdm bar over the restarts.

    Attributes
    ----------
    labels_ : IntTensor (n,)
        int32, as scikit-learn's ``KMeans.labels_`` (and ``predict``).
    inertia_ : float
        Sum of squared feature-space distances to the cluster means.
    n_iter_ : int
        Lloyd iterations of the run kept, counted as scikit-learn's ``KMeans`` counts
        them: the initial assignment and the last iteration (which changed no label)
        included.
    X_fit_ : Tensor
    kernel_ : Kernel or "precomputed"

    Notes
    -----
    Cost per Lloyd iteration: one (n × n) by (n × k) product, O(n² k) for a dense Gram
    and O(n² d) kernel evaluations on the lazy backends; ``predict`` costs one (m × n)
    by (n × k) product. There are no explicit ``cluster_centers_`` (they live in feature
    space); ``transform`` gives the distances to them, ``score`` the opposite of the
    inertia of new points, as scikit-learn's ``KMeans``.

    Examples
    --------
    >>> import torch, torchkern
    >>> X = torch.randn(100, 2, dtype=torch.float64)
    >>> km = torchkern.KernelKMeans(torchkern.RBF(1.0), n_clusters=3, random_state=0).fit(X)
    >>> km.labels_.shape
    torch.Size([100])
    """

    def __init__(self, kernel=None, n_clusters=8, *, n_init=10, max_iter=300, tol=1e-4,
                 init="k-means++", backend=None, random_state=None, verbose=False):
        self.kernel = kernel
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.backend = backend
        self.random_state = random_state
        self.verbose = verbose

    @torch.no_grad()
    def fit(self, X, y=None, sample_weight=None):
        """Cluster X (n, d) (or the Gram matrix with ``"precomputed"``). ``sample_weight``
        (n,), nonnegative: weighted means and inertia, seeding ∝ weights (weighted kernel
        k-means of Dhillon, Guan and Kulis 2004; scikit-learn's ``KMeans`` convention)."""
        kernel = resolve_kernel(self.kernel)
        X = check_precomputed(X, square=True) if is_precomputed(kernel) else check_input(kernel, X)
        K = kernel_matrix(kernel, X, backend=self.backend, reuse=True)
        n = K.shape[0]
        check_int(self.n_clusters, "n_clusters", 1, n)
        check_int(self.n_init, "n_init")
        check_int(self.max_iter, "max_iter")
        check_positive(self.tol, "tol", allow_zero=True)
        if isinstance(self.init, str) and self.init not in ("k-means++", "random"):
            raise ValueError(f"init must be 'k-means++', 'random' or an array, got {self.init!r}")
        if not isinstance(self.init, str) and self.n_init != 1:
            warnings.warn("an explicit init is used once: n_init is ignored", RuntimeWarning,
                          stacklevel=2)
        w = None if sample_weight is None else check_sample_weight(
            sample_weight, n, device=K.device, min_positive=self.n_clusters)
        trace = cheap_trace(K)
        if trace is not None:
            # feature-space distances are those of the centered Gram: 1ᵀK1 (one product)
            warn_if_centering_cancels(trace, total(K) / n**2, n, K.dtype, "KernelKMeans")
        labels, inertia, Z, s, n_iter = _kernel_kmeans(
            K, self.n_clusters, init=self.init, n_init=self.n_init, max_iter=self.max_iter,
            tol=self.tol, random_state=self.random_state, verbose=self.verbose, weights=w)
        self.kernel_ = kernel
        self.X_fit_ = X
        self.labels_ = labels.to(torch.int32)  # scikit-learn's KMeans dtype
        self.inertia_ = inertia
        self.n_iter_ = n_iter
        self._center_weights = Z
        # a cluster of no mass has no mean: predict never picks it (its weights are 0,
        # and a squared norm of 0 would make it the nearest of all)
        self._center_sqnorms = torch.where(Z.sum(0) > 0, s, torch.full_like(s, math.inf))
        if not is_precomputed(kernel) and n_features(X) is not None:
            self.n_features_in_ = n_features(X)
        return self

    @torch.no_grad()
    def _cross_products(self, X):
        if is_precomputed(self.kernel_):
            K = kernel_matrix(self.kernel_, check_precomputed(X, self.labels_.shape[0]))
        else:
            X = check_fitted_input(self.kernel_, X, self.X_fit_, estimator=self)
            K = kernel_matrix(self.kernel_, X, self.X_fit_, backend=self.backend)
        with torch.no_grad():
            return -2 * (K @ self._center_weights.to(K.dtype)) + self._center_sqnorms.to(K.dtype)

    def predict(self, X):
        r"""Nearest training cluster mean in feature space: argmin over c of
        :math:`-\frac{2}{|C_c|}\sum_{l\in C_c}k(x, x_l) + \frac{1}{|C_c|^2}\sum_{l,l'}K_{ll'}`
        (k(x, x) is common to all clusters). One (m × n) by (n × k) product."""
        check_fitted(self, "labels_")
        return self._cross_products(X).argmin(1).to(torch.int32)

    def fit_predict(self, X, y=None):
        """Fit and return ``labels_``."""
        return self.fit(X).labels_

    @property
    def _n_features_out(self):
        """Columns of ``transform`` (``get_feature_names_out``: kernelkmeans0, …)."""
        return self._center_sqnorms.shape[0]

    def _sq_distances(self, X):
        r"""Squared feature-space distances of the rows of X to the cluster means, (m, k):
        :math:`k(x, x) - \frac{2}{|C_c|}\sum_{l\in C_c}k(x, x_l) + \frac{1}{|C_c|^2}
        \sum_{l,l'}K_{ll'}` (∞ for a cluster of no mass), rounding below 0 clipped."""
        check_fitted(self, "labels_")
        if is_precomputed(self.kernel_):
            raise ValueError("transform and score need k(x, x) of the new points, which a "
                             "kernel='precomputed' Gram matrix does not give; use predict")
        X = check_fitted_input(self.kernel_, X, self.X_fit_, estimator=self)
        with torch.no_grad():
            own = self.kernel_.diag(X)
            return (self._cross_products(X) + own.to(self._center_sqnorms.dtype)[:, None]
                    ).clamp_(min=0)

    def transform(self, X):
        """Distances in feature space of the rows of X to the k cluster means, shape
        (m, k) — scikit-learn's ``KMeans.transform`` (cluster-distance space). One
        (m × n) by (n × k) product and the m values k(x, x)."""
        return self._sq_distances(X).sqrt()

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit and return ``transform(X)``."""
        return self.fit(X, sample_weight=sample_weight).transform(X)

    def score(self, X, y=None, sample_weight=None):
        """Opposite of the inertia of X against the fitted cluster means, −Σ wᵢ
        min_c ‖φ(xᵢ) − μ_c‖² (scikit-learn's ``KMeans.score``), weighted by
        ``sample_weight`` (n,)."""
        D = self._sq_distances(X).min(1).values
        if sample_weight is not None:
            D = D * check_sample_weight(sample_weight, D.shape[0], dtype=D.dtype,
                                        device=D.device, min_positive=0)
        return -float(D.sum())
