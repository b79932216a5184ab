"""Fonts for the labels of a picture: the default one, and others for the glyphs it lacks.

Matplotlib draws every label with its default font, DejaVu Sans, which has Latin, Greek
and Cyrillic but no Han, Kana or Hangul: a Chinese sentence would come out as boxes.
`font_families` looks for installed fonts that have the missing characters (matplotlib's
font list, and the system's font files, which may be newer than that list's cache) and
returns a family list for matplotlib's per-glyph fallback (matplotlib >= 3.6 draws each
character with the first family of the list that has it).

matplotlib is imported where it is used, not here, as `attncli.cli.heatmap` says why.
"""

import functools

#: Fonts that draw a placeholder for every character: they "have" every glyph.
_PLACEHOLDER_FONTS = ("Last Resort",)


@functools.lru_cache(maxsize=None)
def _characters(path):
    """The code points of the font file at `path` (empty if it cannot be read)."""
    from matplotlib.ft2font import FT2Font

    try:
        return frozenset(FT2Font(path).get_charmap())
    except (OSError, RuntimeError, ValueError):
        return frozenset()


def _family_name(path):
    from matplotlib.ft2font import FT2Font

    return FT2Font(path).family_name


def _installed_fonts():
    """Paths of the scalable fonts matplotlib knows and those the system has."""
    from matplotlib import font_manager

    paths = {entry.fname for entry in font_manager.fontManager.ttflist
             if not entry.name.startswith(_PLACEHOLDER_FONTS)}
    paths.update(font_manager.findSystemFonts())
    return sorted(paths)


def font_families(texts, fonts=None):
    """The font families that draw `texts`, and the characters none of them has.

    Args:
        texts: the strings a picture shows.
        fonts: font file paths to look in for missing characters. Defaults to every
            installed font (`_installed_fonts`).

    Returns:
        `(families, missing)`: a list of family names, matplotlib's default first, then
        one font for each group of characters it lacks (the font with the most of them
        first); and the sorted list of characters no font has (white space aside).
    """
    import matplotlib
    from matplotlib import font_manager

    default = font_manager.findfont(
        font_manager.FontProperties(family=matplotlib.rcParams["font.family"])
    )
    needed = {ord(char) for text in texts for char in text if not char.isspace()}
    missing = needed - _characters(default)
    families = list(matplotlib.rcParams["font.family"])
    candidates = _installed_fonts() if missing and fonts is None else list(fonts or [])
    while missing and candidates:
        best = max(candidates, key=lambda path: len(missing & _characters(path)))
        found = missing & _characters(best)
        if not found:
            break
        candidates.remove(best)
        name = _family_name(best)
        if name.startswith(_PLACEHOLDER_FONTS):
            continue
        if best not in {entry.fname for entry in font_manager.fontManager.ttflist}:
            font_manager.fontManager.addfont(best)
        if name not in families:
            families.append(name)
        missing -= found
    return families, [chr(code) for code in sorted(missing)]


def glyph_notice(missing, shown=12):
    """One line naming the characters no installed font has, for stderr."""
    listed = " ".join(missing[:shown]) + (f" and {len(missing) - shown} more"
                                          if len(missing) > shown else "")
    return (f"note: no installed font has the glyphs {listed}; the picture shows them as "
            "boxes (install a font that has them, e.g. Noto Sans CJK for Chinese and "
            "Japanese, and run again)")
