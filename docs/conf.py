"""Sphinx configuration of torchkern's documentation site.

Build everything (user guide, API reference, example gallery), from the repository root::

    python -m sphinx -W -b html docs docs/_build/html

Add ``-D plot_gallery=0`` to skip running the gallery's scripts (their pages then show
the code without its output); ``tests/test_docs.py`` builds that way with ``-W``.
"""
import importlib.util
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Document the checkout these pages belong to, installed or not.
sys.path.insert(0, str(ROOT))
# The gallery's scripts draw with matplotlib; never open a window while building.
os.environ.setdefault("MPLBACKEND", "Agg")

import torchkern  # noqa: E402

project = "torchkern"
author = "the torchkern developers"
copyright = "the torchkern developers"
release = version = torchkern.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# docs/index.md is the user guide's front page on GitHub; index.rst is the site's.
exclude_patterns = ["_build", "index.md", "Thumbs.db", ".DS_Store"]

# API pages of packages that are not in this checkout (yet, or any more) are left out,
# and so is their line in api/index.rst (toc.excluded: a reference to an excluded page).
# A package that is present but fails to import still fails the build (autodoc warns,
# -W makes it an error).
OPTIONAL_API_PAGES = {page: f"torchkern.{page}"
                      for page in ("graphs", "sequences", "ntk", "learning", "datasets")}
suppress_warnings = ["toc.excluded"]


def _is_package(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    # A folder without __init__.py (work in progress) is a namespace package: origin None.
    return spec is not None and spec.origin not in (None, "namespace")


exclude_patterns += [f"api/{page}.rst" for page, module in OPTIONAL_API_PAGES.items()
                     if not _is_package(module)]

# -- autodoc / numpydoc ---------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # types are in the numpydoc Parameters sections
autodoc_default_options = {"members": True}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
# numpydoc drops the text of a section it does not know ("Conventions", "Cost", ...) with a
# Python warning that -W does not see: make it fail the build.
warnings.filterwarnings("error", category=UserWarning, module="numpydoc")


def _skip_sklearn_request_methods(app, what, name, obj, skip, options):
    """scikit-learn adds ``set_fit_request`` & co. (metadata routing) to every estimator
    class; they are its API, documented by scikit-learn, not torchkern's."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_request_methods)

# -- MyST (the user guide is Markdown) ------------------------------------------------
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

# -- example gallery ------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples" / "gallery"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "abort_on_example_error": True,
    "write_computation_times": False,
    "min_reported_time": 1,
    "image_scrapers": ("matplotlib",),
}

# -- HTML -----------------------------------------------------------------------------
html_theme = "alabaster"
html_title = f"torchkern {release}"
html_static_path = []
