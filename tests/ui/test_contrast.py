"""Text colours of the design tokens keep WCAG AA contrast (4.5:1) on every surface, in light and
dark mode: computed from static/css/app.css itself, so a token change that breaks it fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CSS = (Path(__file__).resolve().parents[2] / "static/css/app.css").read_text()
PAIRS = {
    name: (light, dark)
    for name, light, dark in re.findall(
        r"--([\w-]+):\s*light-dark\((#[0-9a-fA-F]{6}),\s*(#[0-9a-fA-F]{6})\)", CSS
    )
}
SURFACES = ["bg", "surface", "surface-2", "surface-3"]
TEXTS = ["text", "text-muted", "text-faint"]


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("scheme", [0, 1], ids=["light", "dark"])
@pytest.mark.parametrize("text", TEXTS)
def test_text_tokens_reach_4_5_to_1_on_every_surface(text, scheme):
    for surface in SURFACES:
        ratio = contrast(PAIRS[text][scheme], PAIRS[surface][scheme])
        assert ratio >= 4.5, f"--{text} on --{surface}: {ratio:.2f}:1"


def test_the_contrast_formula_matches_known_values():
    assert round(contrast("#000000", "#ffffff"), 1) == 21.0
    assert round(contrast("#767676", "#ffffff"), 2) == 4.54  # the classic AA grey
