"""Progress bars (tqdm) for long fits: ``verbose=True`` on estimators and solvers.

Bars stay on screen when the work ends (``leave=True``), so the last line says how far it
got. :class:`ResidualBar` shows an iterative solver's progress on a log scale: the digits
of relative residual gained toward ``tol``, which is what decides when it stops.
"""
from __future__ import annotations

import math

__all__ = ["progress_bar", "ResidualBar"]


def progress_bar(verbose, total=None, desc: str = "", unit: str = "it"):
    """A tqdm bar (kept on screen when closed) when ``verbose``, else None."""
    if not verbose:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit=unit, leave=True)


class ResidualBar:
    r"""A bar from relative residual ``start`` down to ``tol`` on a log scale.

    Its length is log₁₀(start / tol) digits; it is filled to the digits gained so far,
    −log₁₀(residual / start) (the best reached: CG residuals are not monotone), and shows
    the residual (named ``label``: a KKT gap, a Newton step...) and the iterations taken.
    """

    def __init__(self, tol: float, desc: str = "cg", start: float = 1.0,
                 label: str = "residual"):
        from tqdm.auto import tqdm
        self.tol, self.start, self.label = float(tol), float(start), label
        self.total = max(math.log10(self.start / self.tol), 1e-3)
        self.digits = 0.0
        self.bar = tqdm(total=self.total, desc=desc, leave=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} "
                                   "digits [{elapsed}<{remaining}{postfix}]")

    def update(self, iterations: int, residual: float) -> None:
        """Record the largest relative residual after ``iterations`` steps."""
        if residual > 0 and math.isfinite(residual):
            gained = math.log10(self.start / residual)
        else:
            gained = self.total if residual == 0 else 0.0
        gained = min(max(gained, self.digits), self.total)
        self.bar.set_postfix_str(f"{self.label} {residual:.1e}, {iterations} it", refresh=False)
        self.bar.update(gained - self.digits)
        self.digits = gained

    def close(self) -> None:
        self.bar.refresh()
        self.bar.close()
