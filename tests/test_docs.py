"""The documentation site builds with warnings as errors, and documents every public name.

Builds docs/ the way docs/index.rst says, with ``-W`` (a docstring that breaks the rst,
an unresolved reference, a failed import fail the test) and ``-D plot_gallery=0`` (the
gallery's pages are generated but its scripts are not run: that takes minutes).
"""
import html as htmllib
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _api_pages():
    """(page, module) for every api/*.rst page: its automodule directive names it."""
    for page in sorted((DOCS / "api").glob("*.rst")):
        m = re.search(r"^\.\. automodule:: (\S+)$", page.read_text(), re.M)
        if m:
            yield page.stem, m.group(1)


def test_sphinx_build_without_warnings_documents_every_public_name(tmp_path):
    out = tmp_path / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
           "-D", "plot_gallery=0", "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (f"sphinx-build -W failed:\n{proc.stdout[-3000:]}\n"
                                  f"{proc.stderr[-6000:]}")

    # Every name in a documented module's __all__ (the reference, read here independently
    # of Sphinx) has an entry: on its module's page, or — for a re-export such as
    # torchkern.RBF — the same object's entry on another page; a submodule has its page.
    pages = []
    for page, module in _api_pages():
        if (out / "api" / f"{page}.html").exists():
            pages.append((page, module))
        else:  # left out only when the package is not in this checkout
            spec = importlib.util.find_spec(module)
            assert spec is None or spec.origin in (None, "namespace"), f"no api/{page}.html"
    ids = set()
    for page, _ in pages:
        html = (out / "api" / f"{page}.html").read_text("utf-8")
        ids |= set(re.findall(r'id="([\w.]+)"', html))
    modules = {m: importlib.import_module(m) for _, m in pages}

    def documented(module, name):
        obj = getattr(modules[module], name)
        if inspect.ismodule(obj):
            return obj.__name__ in modules
        return f"{module}.{name}" in ids or any(
            f"{m}.{name}" in ids and getattr(mod, name, None) is obj for m, mod in modules.items())

    checked = 0
    for _, module in pages:
        names = getattr(modules[module], "__all__", [])
        missing = [n for n in names if not documented(module, n)]
        assert not missing, f"{module}: no API entry for {missing}"
        checked += len(names)
    assert checked >= 80

    # The user guide: every Markdown page of docs/ is on the site (index.md is the GitHub
    # front page, replaced by index.rst there).
    for md in DOCS.glob("*.md"):
        if md.stem != "index":
            assert (out / f"{md.stem}.html").exists(), md.name

    # The API index and each module's page carry a summary table of the module's __all__
    # (one row per name, linked to its entry).
    index = (out / "api" / "index.html").read_text("utf-8")
    for page, module in pages:
        if page == "torchkern":
            continue
        html = (out / "api" / f"{page}.html").read_text("utf-8")
        for name in getattr(modules[module], "__all__", []):
            obj = getattr(modules[module], name)
            if inspect.ismodule(obj):
                continue
            link = re.compile(rf'href="[^"]*#[\w.]+\.{re.escape(name)}"')
            assert link.search(html), f"api/{page}.html: no summary row for {name}"
            assert link.search(index), f"api/index.html: no summary row for {module}.{name}"

    # No reST left unrendered: a docstring paragraph numpydoc misreads (text after the last
    # parameter becomes a bold "field" printed verbatim) shows its roles and ``literals``.
    raw = re.compile(r":(?:func|class|meth|mod|attr|obj|data|exc|math|ref|doc|term):`|``")
    offenders = []
    for page in sorted(out.rglob("*.html")):
        text = page.read_text("utf-8")
        for tag in ("pre", "script", "style", "code"):  # code shows source as it is
            text = re.sub(rf"<{tag}\b.*?</{tag}>", "", text, flags=re.S)
        text = htmllib.unescape(re.sub(r"<[^>]+>", " ", text))
        offenders += [f"{page.relative_to(out)}: ...{text[max(0, m.start() - 60):m.end() + 40]!r}"
                      for m in raw.finditer(text)]
    assert not offenders, "unrendered reST in the built pages:\n" + "\n".join(offenders[:20])

    # Formulas render offline: MathJax is loaded from the built site, never the network,
    # on every page that has math; no page loads a script or a style sheet from the network.
    math_pages = 0
    for page in sorted(out.rglob("*.html")):
        text = page.read_text("utf-8")
        srcs = re.findall(r'<script[^>]*\bsrc="([^"]+)"', text)
        hrefs = re.findall(r'<link[^>]*rel="stylesheet"[^>]*href="([^"]+)"', text)
        remote = [u for u in srcs + hrefs if re.match(r"(https?:)?//", u)]
        assert not remote, f"{page.relative_to(out)} loads {remote} from the network"
        if 'class="math' in text:
            math_pages += 1
            mathjax = [u for u in srcs if "mathjax" in u.lower()]
            assert mathjax, f"{page.relative_to(out)} has math but no MathJax"
            for u in mathjax:
                assert (page.parent / u.split("?")[0]).is_file(), f"{page}: {u} not built"
    assert math_pages >= 5

    # The front page starts a user: install line, an example with the output it printed
    # when the page was built, and its figure.
    front = (out / "index.html").read_text("utf-8")
    front_text = htmllib.unescape(re.sub(r"<[^>]+>", "", front))
    assert "pip install torch" in front_text
    output = re.search(r'class="[^"]*runblock-output.*?</pre>', front, re.S)
    assert output and "test R²" in htmllib.unescape(re.sub(r"<[^>]+>", "", output.group(0)))
    img = re.search(r'<img src="(_static/runblock/[^"]+)"', front)
    assert img and (out / img.group(1)).stat().st_size > 10_000

    # The gallery: one page per example script.
    scripts = sorted(p.stem for p in (ROOT / "examples" / "gallery").glob("plot_*.py"))
    assert len(scripts) >= 5
    for s in scripts:
        assert (out / "auto_examples" / f"{s}.html").exists(), s


def _distributions_installed_by(command):
    """Distribution names (lower case, ``-``) that ``command``'s ``pip install`` steps put
    in an environment: the project's requirements, the extras named, the packages named,
    and (as far as they are installed here) what those require, recursively — except
    after ``--no-deps``."""
    import ast
    import importlib.metadata as md

    tree = ast.parse((ROOT / "setup.py").read_text())
    kw = {k.arg: k.value for n in ast.walk(tree) if isinstance(n, ast.Call)
          for k in n.keywords if k.arg in ("install_requires", "extras_require")}
    extras = ast.literal_eval(kw["extras_require"])

    def name(req):
        return re.match(r"[A-Za-z0-9_.\-]+", req).group(0).lower().replace("_", "-")

    todo, plain = [], []
    for step in command.split("&&"):
        words = step.split()
        if words[:2] != ["pip", "install"]:
            continue
        for w in words[2:]:
            w = w.strip("\"'")
            if w.startswith("."):  # the project, with its extras
                todo += [name(r) for r in ast.literal_eval(kw["install_requires"])]
                for extra in re.findall(r"\[([\w,]+)\]", w)[:1]:
                    todo += [name(r) for e in extra.split(",") for r in extras[e]]
            elif not w.startswith("-"):
                (plain if "--no-deps" in words else todo).append(name(w))
    seen = set(plain)
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        try:
            reqs = md.requires(dist) or []
        except md.PackageNotFoundError:
            continue
        todo += [name(r) for r in reqs if "extra ==" not in r]
    return seen


def _gallery_imports():
    """(script, top-level module) for every module a gallery script imports or looks up
    (``find_spec("x")``, ``importlib.resources.files("x")``), standard library excluded."""
    import ast

    for script in sorted((ROOT / "examples" / "gallery").glob("plot_*.py")):
        for node in ast.walk(ast.parse(script.read_text("utf-8"))):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                mods = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") in
                  ("find_spec", "files") and node.args
                  and isinstance(node.args[0], ast.Constant)):
                mods = [node.args[0].value]
            for m in mods:
                top = m.split(".")[0]
                if top not in sys.stdlib_module_names and top != "torchkern":
                    yield script.name, top


def test_documented_install_commands_bring_what_the_gallery_imports():
    # The README's docs command builds the site, which runs every gallery script; the
    # gallery README's command is how a user runs them on their own. Each must install
    # every package a script imports (a script that fails aborts the docs build).
    import importlib.metadata as md

    to_dist = md.packages_distributions()
    readme = (ROOT / "README.md").read_text("utf-8")
    docs_cmd = next(line for line in readme.splitlines()
                    if "pip install" in line and "sphinx" in line)
    gallery_cmd = next(line.strip() for line in
                       (ROOT / "examples" / "gallery" / "README.rst").read_text().splitlines()
                       if "pip install" in line)
    for label, cmd in (("README docs command", docs_cmd),
                       ("gallery README command", gallery_cmd)):
        installed = _distributions_installed_by(cmd)
        missing = sorted({f"{script}: {mod}" for script, mod in _gallery_imports()
                          if not {d.lower().replace("_", "-") for d in
                                  to_dist.get(mod, [mod])} & installed})
        assert not missing, f"{label} `{cmd}` installs nothing providing {missing}"
