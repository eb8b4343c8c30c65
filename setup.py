from setuptools import find_packages, setup

setup(
    name="torchkern",
    version="0.1.0",
    description="Kernel methods in PyTorch: lazy Gram matrices, matrix-free solvers, learnable kernels.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["torchkern", "torchkern.*"]),
    package_data={"torchkern.sequences": ["data/*"], "torchkern._compiled": ["*.cpp"]},
    python_requires=">=3.10",
    install_requires=[
        "torch>=2.1",
        "numpy>=1.24",
        "scipy>=1.10",
        "pykeops>=2.2",
        "gpytorch>=1.11",
        "torch-geometric>=2.4",
        "tqdm>=4.60",
        "scikit-learn>=1.3",
    ],
    extras_require={
        "test": ["pytest>=7", "hypothesis>=6", "psutil>=5", "grakel>=0.1.10", "pandas>=1.5",
                 # tests/test_triton_engine.py runs the Triton engine under its CPU
                 # interpreter; triton ships wheels for Linux only (skipped elsewhere)
                 "triton>=3.0; platform_system == 'Linux'",
                 # tests/test_docs.py builds the documentation (gallery not run)
                 "sphinx>=8", "myst-parser>=3", "sphinx-gallery>=0.16", "numpydoc>=1.6",
                 "furo>=2024.1", "sphinx-mathjax-offline>=0.0.2",
                 # tests/test_gallery.py runs the gallery's scripts
                 "matplotlib>=3.7"],
        "bench": ["scikit-learn>=1.3", "psutil>=5"],
        # the build runs the gallery: matplotlib, and GraKeL for its TU graph data sets
        # (modlamp's peptides: `pip install --no-deps modlamp`, as the README says)
        "docs": ["sphinx>=8", "myst-parser>=3", "sphinx-gallery>=0.16", "numpydoc>=1.6",
                 "furo>=2024.1", "sphinx-mathjax-offline>=0.0.2", "matplotlib>=3.7",
                 "grakel>=0.1.10"],
        # what the example gallery's scripts need to run on their own
        "gallery": ["matplotlib>=3.7"],
    },
)
