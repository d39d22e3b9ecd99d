"""The report as a browser shows it: headless Chromium (Debian's package) screenshots it and dumps its DOM.

Needs /usr/bin/chromium; install it with deploy/install-chromium.sh. The page is opened
from file:// with networking features off, as an operator on a closed network would.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.report.pagecheck import assert_valid_png, ink_fraction, parse

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_S = 120
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1400,3000",
]

# Appended to a copy of the report (next to it, so relative image paths still resolve):
# after the load event, the title says how many <img> decoded to a real picture. The
# report itself stays script-free.
PROBE = """<script>
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  var bad = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                .map(function (i) { return i.getAttribute("src"); });
  var overflow = document.documentElement.scrollWidth - document.documentElement.clientWidth;
  document.title = "loaded " + ok.length + " of " + imgs.length + "; overflow " + overflow +
                   "px; broken [" + bad.join(",") + "]";
});
</script>
"""


def _chromium() -> Path:
    """Checked inside each test (not a fixture) so a missing browser is a FAIL, not an ERROR."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash deploy/install-chromium.sh` (Debian's chromium "
                    "package) to render the report in a headless browser", pytrace=False)
    return CHROMIUM


def _run(chromium: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(chromium), *FLAGS, f"--user-data-dir={profile}", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"chromium did not finish within {TIMEOUT_S}s: {' '.join(cmd)}")
        raise AssertionError from exc  # unreachable; keeps type checkers happy
    assert proc.returncode == 0, f"chromium exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    return proc


def test_screenshot_is_not_blank(report_dir: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    shot = tmp_path / "report.png"
    _run(chromium, tmp_path / "profile", f"--screenshot={shot}", (report_dir / "index.html").as_uri())
    width, height = assert_valid_png(shot, min_size=(1000, 1000))
    assert (width, height) == (1400, 3000)
    ink = ink_fraction(shot)
    # Measured ~0.11 for the fixture: text, tables and two charts above the fold.
    assert ink > 0.03, f"screenshot is (nearly) blank: {ink:.3%} non-white pixels"
    # Keep a copy next to the report for a human to look at after a failure.
    shutil.copy(shot, report_dir / "screenshot-test.png")


def test_every_image_loads_in_the_browser(report_dir: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    index = report_dir / "index.html"
    expected = parse(index.read_text()).imgs
    assert len(expected) == 5

    # The rendered DOM of the report itself: every <img> is there and its file exists.
    dom = _run(chromium, tmp_path / "profile-a", "--dump-dom", index.as_uri()).stdout
    rendered = parse(dom).imgs
    assert [i["src"] for i in rendered] == [i["src"] for i in expected]
    for img in rendered:
        assert_valid_png(report_dir / str(img["src"]))
        assert img.get("alt"), f"{img['src']} has no alt text in the rendered DOM"

    # And the browser actually decoded each one (naturalWidth > 0), with no sideways scroll.
    probe = report_dir / "probe-images.html"
    probe.write_text(index.read_text().replace("</body>", PROBE + "</body>"), encoding="utf-8")
    try:
        dom = _run(chromium, tmp_path / "profile-b", "--virtual-time-budget=10000", "--dump-dom",
                   probe.as_uri()).stdout
    finally:
        probe.unlink()
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title, "no <title> in the dumped DOM"
    assert title.group(1) == "loaded 5 of 5; overflow 0px; broken []", title.group(1)
