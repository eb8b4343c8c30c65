"""Unsupervised kernel methods: kernel PCA, kernel k-means, spectral clustering, kernel
CCA, kernel density estimation and Nadaraya–Watson regression."""
from .cca import KernelCCA
from .density import KernelDensity, NadarayaWatson
from .kmeans import KernelKMeans
from .pca import KernelPCA
from .spectral import SpectralClustering

__all__ = ["KernelPCA", "KernelKMeans", "SpectralClustering", "KernelCCA", "KernelDensity",
           "NadarayaWatson"]
