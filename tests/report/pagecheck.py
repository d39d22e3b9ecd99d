"""Helpers to inspect a written report: its <img> tags and PNG files."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.imgs: list[dict[str, str | None]] = []
        self.tags: list[str] = []
        self.headings: list[str] = []
        self._in_heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "img":
            self.imgs.append(dict(attrs))
        if tag in ("h1", "h2"):
            self._in_heading = True
            self.headings.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h1", "h2"):
            self._in_heading = False

    def handle_data(self, data: str) -> None:
        if self._in_heading:
            self.headings[-1] += data


def parse(html_text: str) -> _Collector:
    collector = _Collector()
    collector.feed(html_text)
    return collector


def assert_valid_png(path: Path, min_size: tuple[int, int] = (200, 100)) -> tuple[int, int]:
    assert path.is_file(), f"{path} is missing"
    assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        im.load()
        assert im.width >= min_size[0] and im.height >= min_size[1], f"{path}: {im.size} is too small"
        return im.size


def ink_fraction(path: Path, threshold: int = 235) -> float:
    """Share of pixels darker than near-white: 0.0 for a blank page."""
    with Image.open(path) as im:
        grey = im.convert("L")
        hist = grey.histogram()
    dark = sum(hist[:threshold])
    return dark / (grey.width * grey.height)
