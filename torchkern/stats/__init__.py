"""Statistics with kernels: mean embeddings, MMD, HSIC and permutation tests.

Everything here reads Gram matrices through :class:`~torchkern.gram.KernelMatrix`
products, so it runs on lazy (blocked / KeOps) Gram matrices, and the estimators are
differentiable losses (MMD for generative models). See ``docs/stats.md``.
"""
from .bandwidth import median_heuristic
from .embedding import KernelMeanEmbedding, mean_embedding
from .hsic import hsic, hsic_biased, hsic_unbiased
from .mmd import mmd2, mmd2_biased, mmd2_linear, mmd2_unbiased
from .permutation import HSICTest, MMDTest, PermutationTestResult
from .witness import witness

__all__ = [
    "mean_embedding", "KernelMeanEmbedding", "witness",
    "mmd2", "mmd2_biased", "mmd2_unbiased", "mmd2_linear",
    "hsic", "hsic_biased", "hsic_unbiased",
    "MMDTest", "HSICTest", "PermutationTestResult",
    "median_heuristic",
]
