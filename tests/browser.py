"""Pages opened in a real browser (Debian's chromium, driven by playwright) as a reader sees them.

`look_at(page)` opens an HTML file mtl wrote at a laptop's width and a desktop's (1280 and
1920 px) and returns what is wrong with it at either: a console or script error, a picture that
does not load, a chart with nothing drawn, a table or chart wider than the window (outside a
scrolling box), table cells cut at the edge of their scrolling box or hidden until it scrolls
(a table must fit), a cell whose text is clipped inside it, text drawn over other text. A
screenshot of each page at each width goes to SCREENSHOTS (the test log names the folder).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

WIDTHS, HEIGHT = (1280, 1920), 1000
SCREENSHOTS = Path(os.environ.get("MTL_SCREENSHOTS", Path(__file__).parent.parent / "runs" / "screenshots"))
SVG_IMAGE = re.compile(r'<img[^>]*src="data:image/svg\+xml;base64,([^"]+)"[^>]*>')


def chromium() -> str:
    """The system browser; CI installs it (Debian's `chromium`), elsewhere a test without it skips."""
    found = os.environ.get("MTL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install chromium (.ci/run: apt-get install chromium)")
        pytest.skip("no chromium here: apt-get install chromium (CI installs it)")
    return found


# Run in the page: what a reader would see wrong, as lists of short descriptions.
CHECKS = """() => {
  const width = window.innerWidth;
  const scrolls = el => {
    for (let up = el.parentElement; up; up = up.parentElement) {
      const overflow = getComputedStyle(up).overflowX;
      if (overflow === 'auto' || overflow === 'scroll') return true;
    }
    return false;
  };
  const name = el => el.tagName.toLowerCase() + ' "' + (el.alt || el.textContent || '').trim().slice(0, 40) + '"';
  const broken = [...document.images].filter(img => !img.complete || img.naturalWidth === 0).map(name);
  const wide = [...document.querySelectorAll('table, img, svg, pre')]
    .filter(el => el.getBoundingClientRect().right > width + 1 && !scrolls(el)).map(name);
  // a table cut off by its scrolling box: a column a reader must scroll to, or a cell cut at
  // the box's edge (`sto` of "stopped by"): every table must fit at 1280 px
  const hidden = [];
  for (const table of document.querySelectorAll('table')) {
    const box = table.parentElement.getBoundingClientRect();
    for (const cell of table.querySelectorAll('th, td')) {
      if (cell.getBoundingClientRect().right > box.right + 1) hidden.push(name(cell));
    }
  }
  // a cell whose own text does not fit in it (overflow hidden, an ellipsis)
  const clipped = [...document.querySelectorAll('th, td')]
    .filter(cell => cell.scrollWidth > cell.clientWidth + 1).map(name);
  const texts = [...document.body.querySelectorAll('*')].filter(el =>
    [...el.childNodes].some(node => node.nodeType === 3 && node.textContent.trim()) &&
    el.getClientRects().length && getComputedStyle(el).visibility !== 'hidden');
  const overlapping = [];
  for (let i = 0; i < texts.length; i++) {
    const a = texts[i].getBoundingClientRect();
    for (let j = i + 1; j < texts.length; j++) {
      if (texts[i].contains(texts[j]) || texts[j].contains(texts[i])) continue;
      const b = texts[j].getBoundingClientRect();
      const x = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const y = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (x > 2 && y > 2) overlapping.push(name(texts[i]) + ' over ' + name(texts[j]));
    }
  }
  return {broken, wide, hidden, clipped, overlapping, pageWidth: document.documentElement.scrollWidth, width};
}"""


def look_at(page_path: Path, name: str) -> list[str]:
    """What is wrong with `page_path` in the browser at each width (empty: nothing), each problem
    once, with the widths it shows at; its screenshots are SCREENSHOTS/<name>-<width>.png."""
    from playwright.sync_api import sync_playwright

    problems = [
        f"chart {i + 1} draws nothing" for i, chart in enumerate(svg_charts(page_path)) if not drawn(chart)
    ]
    seen: dict[str, list[int]] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            for width in WIDTHS:
                for problem in _looked_at(browser, page_path, f"{name}-{width}", width):
                    seen.setdefault(problem, []).append(width)
        finally:
            browser.close()
    return problems + [f"{problem} (at {', '.join(map(str, widths))} px)" for problem, widths in seen.items()]


def _looked_at(browser, page_path: Path, shot: str, width: int) -> list[str]:
    errors: list[str] = []
    page = browser.new_page(viewport={"width": width, "height": HEIGHT})
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_path.resolve().as_uri(), wait_until="load")
    found = page.evaluate(CHECKS)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{shot}.png"), full_page=True)
    page.close()
    problems = [f"console: {error}" for error in errors]
    problems += [f"does not load: {item}" for item in found["broken"]]
    problems += [f"wider than the window: {item}" for item in found["wide"]]
    problems += [f"out of view until the table scrolls: {item}" for item in found["hidden"]]
    problems += [f"clipped in its cell: {item}" for item in found["clipped"]]
    problems += [f"text over text: {item}" for item in found["overlapping"]]
    if found["pageWidth"] > found["width"]:
        problems.append("the page scrolls sideways")
    return problems


def svg_charts(page_path: Path) -> list[ElementTree.Element]:
    """The page's charts: matplotlib's SVGs, embedded as data: URIs."""
    return [
        ElementTree.fromstring(base64.b64decode(data)) for data in SVG_IMAGE.findall(page_path.read_text())
    ]


def drawn(svg: ElementTree.Element) -> bool:
    """Whether a matplotlib SVG has data drawn in it: an element clipped to the axes (lines,
    markers, bars, images) that is not a grid line of an axis."""

    def walk(element: ElementTree.Element, in_axis: bool) -> bool:
        in_axis = in_axis or element.get("id", "").startswith(("matplotlib.axis", "xtick", "ytick"))
        if not in_axis and element.get("clip-path"):
            return True
        return any(walk(child, in_axis) for child in element)

    return walk(svg, False)


def can_look() -> bool:
    """Whether pages can be looked at here (on CI they must: chromium() fails there without one)."""
    try:
        chromium()
    except pytest.skip.Exception:
        return False
    return True
