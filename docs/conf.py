"""Sphinx configuration of torchkern's documentation site.

Build everything (user guide, API reference, example gallery), from the repository root::

    python -m sphinx -W -b html docs docs/_build/html

Add ``-D plot_gallery=0`` to skip running the gallery's scripts (their pages then show
the code without its output); ``tests/test_docs.py`` builds that way with ``-W``.
"""
import importlib.util
import os
import re
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Document the checkout these pages belong to, installed or not.
sys.path.insert(0, str(ROOT))
# ... and in the processes the gallery's scripts start (the distributed example).
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT),
                                                         os.environ.get("PYTHONPATH")]))
# The gallery's scripts draw with matplotlib; never open a window while building.
os.environ.setdefault("MPLBACKEND", "Agg")

import torchkern  # noqa: E402

project = "torchkern"
author = "the torchkern developers"
copyright = "the torchkern developers"
release = version = torchkern.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    # A copy of MathJax served from the built site (_static/mathjax), so formulas render
    # offline; it sets mathjax_path to that copy. tests/test_docs.py checks that no page
    # loads MathJax from the network.
    "sphinx-mathjax-offline",
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


# -- API summaries: tables generated from each module's __all__ ------------------------
# Every API page's module docstring is followed by an autosummary table of the names in
# the module's __all__ (name and one-line summary, linked to its entry), and api/index.rst
# gathers them all (``.. api-index::``), so a name added to a module's __all__ appears in
# the reference without editing a page.
autosummary_generate = False
API_MODULES = {}  # module -> api page, read from the automodule directive of docs/api/*.rst
_API = Path(__file__).parent / "api"
# in the order of api/index.rst's toctree, then any other page
_order = re.findall(r"^   (\w+)$", (_API / "index.rst").read_text(encoding="utf-8"), re.M)
for _page in sorted(_API.glob("*.rst"),
                    key=lambda p: (_order.index(p.stem) if p.stem in _order else len(_order),
                                   p.stem)):
    _m = re.search(r"^\.\. automodule:: (\S+)$", _page.read_text(encoding="utf-8"), re.M)
    if _m and f"api/{_page.stem}.rst" not in exclude_patterns:
        API_MODULES[_m.group(1)] = _page.stem


def _documented_name(module, name):
    """The dotted name under which ``module.name`` has its API entry: the re-exporting
    module's own entry, unless a deeper documented module (the one that defines the
    object) exports it too — ``torchkern.RBF`` is documented as ``torchkern.kernels.RBF``."""
    import importlib
    import inspect

    obj = getattr(importlib.import_module(module), name)
    if inspect.ismodule(obj):
        return obj.__name__
    home = getattr(obj, "__module__", None) or ""
    best = module
    for other in API_MODULES:
        if (len(other) > len(best) and (home == other or home.startswith(other + "."))
                and getattr(importlib.import_module(other), name, None) is obj):
            best = other
    return f"{best}.{name}"


def api_summary_lines(module):
    """reST of the table of ``module.__all__`` (the ``api-summary`` directive below)."""
    return [f".. api-summary:: {module}", ""]


def _add_summary_table(app, what, name, obj, options, lines):
    """Put the table of an API page's module after the module's docstring."""
    if what == "module" and name in API_MODULES and not options.get("no-index"):
        lines += ["", ".. rubric:: Summary", ""] + api_summary_lines(name)


def _api_directives():
    import importlib
    import inspect

    from docutils import nodes
    from docutils.statemachine import StringList
    from sphinx.ext.autosummary import extract_summary
    from sphinx.util.docutils import SphinxDirective

    def parse(directive, text, match_titles=False):
        node = nodes.section() if match_titles else nodes.container()
        node.document = directive.state.document
        directive.state.nested_parse(StringList(text, source="conf.py"),
                                     directive.content_offset, node,
                                     match_titles=match_titles)
        return node.children

    class ApiSummary(SphinxDirective):
        """``.. api-summary:: module``: a table of the names in ``module.__all__``, each
        linked to its entry, with the first sentence of its docstring (as scikit-learn's
        and GPyTorch's API pages)."""

        required_arguments = 1
        option_spec = {"own": lambda arg: True}

        def run(self):
            module = self.arguments[0]
            mod = importlib.import_module(module)
            rows = []
            for name in getattr(mod, "__all__", []):
                obj = getattr(mod, name)
                target = _documented_name(module, name)
                if "own" in self.options and (inspect.ismodule(obj)
                                              or target != f"{module}.{name}"):
                    continue  # with :own:, only the names documented on this page
                role = "mod" if inspect.ismodule(obj) else "obj"
                own = type(obj).__module__.startswith("torchkern")  # e.g. the config object
                doc = (inspect.getdoc(obj) if (inspect.ismodule(obj) or callable(obj) or own)
                       else None)
                summary = (extract_summary(doc.splitlines(), self.state.document.settings)
                           if doc else "")
                rows += [f"   * - :py:{role}:`~{target}`", f"     - {summary}"]
            if not rows:
                return []
            text = [".. list-table::", "   :class: autosummary longtable",
                    "   :widths: 30 70", ""] + rows
            return parse(self, text)

    class ApiIndex(SphinxDirective):
        """``.. api-index::``: for each API page, its module (linked to the page), the
        first paragraph of the module's docstring and the module's table."""

        def run(self):
            text = []
            for module, page in API_MODULES.items():
                doc = inspect.getdoc(importlib.import_module(module)) or ""
                first = " ".join(doc.split("\n\n")[0].split())
                title = f"{module}"
                text += [title, "-" * len(title), "", f"{first} :doc:`Full reference <{page}>`.",
                         ""] + api_summary_lines(module)
                if module == "torchkern":  # its re-exports are listed under their modules
                    text[-1:] = ["   :own:", ""]
            return parse(self, text, match_titles=True)

    return ApiSummary, ApiIndex


def _runblock_directive():
    import contextlib
    import io
    import textwrap

    from docutils import nodes
    from sphinx.util.docutils import SphinxDirective

    class RunBlock(SphinxDirective):
        """``.. runblock::`` then Python code: shown, run when the page is built (in one
        namespace per page), followed by what it printed — so the front page's output is
        never stale. ``:figure: name.png`` also saves the figure the code drew and shows
        it under the output."""

        has_content = True
        option_spec = {"figure": str, "alt": str}

        def run(self):
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            code = "\n".join(self.content)
            env = self.env
            namespaces = env.temp_data.setdefault("runblock_ns", {})
            ns = namespaces.setdefault(env.docname, {"__name__": "__main__"})
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"<{env.docname} runblock>", "exec"), ns)
            result = [nodes.literal_block(code, code, language="python")]
            if out.getvalue():
                text = out.getvalue().rstrip()
                result.append(nodes.literal_block(text, text, language="none",
                                                  classes=["runblock-output"]))
            if "figure" in self.options:
                name = self.options["figure"]
                target = Path(self.env.app.outdir) / "_static" / "runblock" / name
                target.parent.mkdir(parents=True, exist_ok=True)
                plt.gcf().savefig(target, dpi=110, bbox_inches="tight")
                plt.close("all")
                depth = "../" * env.docname.count("/")
                alt = self.options.get("alt", "")
                html = textwrap.dedent(f"""\
                    <figure class="runblock-figure">
                    <img src="{depth}_static/runblock/{name}" alt="{alt}" style="max-width:100%">
                    </figure>""")
                result.append(nodes.raw("", html, format="html"))
            return result

    return RunBlock


def setup(app):
    app.add_directive("runblock", _runblock_directive())
    app.connect("autodoc-skip-member", _skip_sklearn_request_methods)
    app.connect("autodoc-process-docstring", _add_summary_table)
    summary, index = _api_directives()
    app.add_directive("api-summary", summary)
    app.add_directive("api-index", index)

# -- MyST (the user guide is Markdown) ------------------------------------------------
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

# -- example gallery ------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples" / "gallery"),
    "gallery_dirs": "auto_examples",
    # Scripts run during the build (all of them by default); a regular expression in
    # TORCHKERN_GALLERY_RUN runs only those it matches, the others shown without output.
    "filename_pattern": os.environ.get("TORCHKERN_GALLERY_RUN", r"/plot_"),
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "abort_on_example_error": True,
    "write_computation_times": False,
    "min_reported_time": 1,
    "image_scrapers": ("matplotlib",),
}

# -- HTML -----------------------------------------------------------------------------
# Furo (maintained, https://github.com/pradyunsg/furo): its sidebar wraps long entries and
# code blocks scroll sideways instead of being cut.
html_theme = "furo"
html_title = f"torchkern {release}"
html_static_path = ["_static"]
html_css_files = ["torchkern.css"]
