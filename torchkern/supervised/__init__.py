from .classification import KernelLogisticRegression
from .svm import SVC, SVR
from .ridge import KernelRidge
from .gp import GaussianProcessRegressor

__all__ = ["KernelRidge", "GaussianProcessRegressor", "KernelLogisticRegression", "SVC", "SVR"]
