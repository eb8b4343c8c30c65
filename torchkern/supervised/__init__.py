from .svm import SVC, SVR

__all__ = ["SVC", "SVR"]
