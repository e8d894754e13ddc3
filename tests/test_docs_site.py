"""The built docs site as a reader sees it (``make docs`` runs these after the build): every page's images
exist and decode, every link inside the site resolves, and headless Chromium renders the landing page, a
journey and a gallery example to screenshots that are not blank (docs/_build/screenshots/)."""

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import matplotlib.image
import numpy as np
import pytest

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "docs" / "_build" / "html"
SHOTS = ROOT / "docs" / "_build" / "screenshots"
#: the pages a first visit goes through: the landing page, a journey, a gallery example
VISITED = ("index.html", "tutorials/chaos-study.html", "auto_examples/plot_energy_drift.html")


class Links(HTMLParser):
    """The src of every <img> and the href of every <a> and <link rel=stylesheet> of a page."""

    def __init__(self):
        super().__init__()
        self.images, self.links = [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])
        elif tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        elif tag == "link" and attrs.get("rel") == "stylesheet" and attrs.get("href"):
            self.links.append(attrs["href"])


def site_pages() -> list[Path]:
    assert (SITE / "index.html").exists(), f"no built site at {SITE}: run `make docs`"
    # _static holds the theme's own files (Jinja templates among them), not pages of the site
    return sorted(page for page in SITE.rglob("*.html") if "_static" not in page.relative_to(SITE).parts)


def local_target(page: Path, url: str) -> Path | None:
    """The file a link inside the site points at (None for an external link, a mailto or an in-page anchor)."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    return (page.parent / unquote(parts.path)).resolve()


def parsed(page: Path) -> Links:
    links = Links()
    links.feed(page.read_text(encoding="utf-8"))
    return links


def test_every_image_of_the_site_exists_and_decodes():
    images = 0
    for page in site_pages():
        for src in parsed(page).images:
            target = local_target(page, src)
            assert target is not None, f"{page.relative_to(SITE)}: image {src} is fetched from elsewhere"
            assert target.is_file(), f"{page.relative_to(SITE)}: image {src} is missing"
            if target.suffix == ".png":
                pixels = matplotlib.image.imread(target)
                assert pixels.size > 0 and np.ptp(pixels) > 0, f"{target} is blank"
            images += 1
    assert images >= 5  # the gallery's figures at least


def test_every_link_inside_the_site_resolves():
    for page in site_pages():
        for href in parsed(page).links:
            target = local_target(page, href)
            if target is not None:
                assert target.exists(), f"{page.relative_to(SITE)}: broken link {href}"


@pytest.mark.parametrize("page", VISITED)
def test_chromium_renders_the_page(page):
    """A 1280×1600 screenshot by headless Chromium, not blank (its pixels vary), and the page's figures among
    its images (the gallery example draws at least one)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "headless Chromium is needed (Debian's chromium package; .ci/run installs it)"
    path = SITE / page
    assert path.exists(), f"{page} was not built"
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / (page.replace("/", "_").replace(".html", ".png"))
    shot.unlink(missing_ok=True)
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1280,1600", f"--screenshot={shot}", path.as_uri()],
                   check=True, capture_output=True, timeout=120)
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (1600, 1280)
    assert np.std(pixels[..., :3]) > 0.02, f"{shot} is nearly blank"
    if page.startswith("auto_examples"):
        assert any("sphx_glr" in src for src in parsed(path).images), "the gallery example shows no figure"
