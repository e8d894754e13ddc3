"""Sphinx configuration of Armillary's docs: MyST Markdown pages, the pydata theme, sphinx-gallery's
executed examples and the reference pages generated from the code (:mod:`armillary.jobs.reference`).
Offline: no intersphinx, no fetched fonts; ``make docs`` builds with warnings as errors."""

import os
import pathlib
import re

from armillary.jobs.reference import reference_pages

HERE = pathlib.Path(__file__).resolve().parent

project = "Armillary"
author = "the Armillary developers"
copyright = "2026, the Armillary developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx_gallery.gen_gallery"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "README.md", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.json", "auto_examples/*.md5", "sg_execution_times.rst"]
myst_enable_extensions = ["colon_fence"]  # equations are Unicode text: nothing fetched to view them
myst_heading_anchors = 3
html_theme = "pydata_sphinx_theme"
html_title = "Armillary"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2, "icon_links": [],
                      "footer_start": ["copyright"], "footer_end": []}
html_static_path = []
autodoc_member_order = "bysource"
autodoc_typehints = "description"
sphinx_gallery_conf = {
    "examples_dirs": "gallery",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "matplotlib_animations": False,
    "within_subsection_order": "FileNameSortKey",
}
suppress_warnings = ["config.cache"]  # sphinx-gallery's configuration holds functions


def write_reference(app) -> None:
    """The generated reference pages, rewritten only when their text changed (Sphinx then rebuilds them)."""
    directory = HERE / "reference" / "generated"
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in reference_pages().items():
        path = directory / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


#: an inline literal of reStructuredText, left as it is by plain_docstring
INLINE_LITERAL = re.compile(r"(``.+?``)")


def plain_docstring(app, what, name, obj, options, lines) -> None:
    """The package's docstrings are plain text with math in Unicode (|ΔE|/|E0|, a·b, x*): reStructuredText
    would read |…| as substitutions and a lone * as emphasis, so both are escaped outside inline literals."""
    for k, line in enumerate(lines):
        parts = INLINE_LITERAL.split(line)
        lines[k] = "".join(part if INLINE_LITERAL.fullmatch(part) else part.replace("|", r"\|").replace("*", r"\*")
                           for part in parts)


def setup(app):
    app.connect("builder-inited", write_reference)
    app.connect("autodoc-process-docstring", plain_docstring)
    os.environ.setdefault("MPLBACKEND", "Agg")
