"""The ``"compiled"`` backend: fused K V reductions that never store a block of K.

Two engines, tried in this order:

* :mod:`.native` — a hand-vectorized C++ loop for the radial kernels (RBF, Laplacian,
  Matérn 3/2 and 5/2: a profile of the squared distance) on the CPU, compiled once per
  machine with the system's C++ compiler;
* :mod:`.inductor` — any kernel formula, its tile reduction compiled by ``torch.compile``
  (C++/OpenMP on the CPU, Triton on CUDA).

A third engine, :mod:`.triton`, is the ``"triton"`` backend (CUDA): one Triton kernel
generated from the formula per product, two (one for K(X, X)) per backward.

Both implement the idea of KeOps (Charlier, Feydy, Glaunès, Collin and Durif 2021,
"Kernel operations on the GPU, with autodiff, without memory overflows", JMLR 22(74)):
the kernel formula is evaluated inside the reduction, O(n + m) memory, gradients by a
second fused reduction.
"""
