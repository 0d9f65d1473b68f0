"""Docker's build-context rules, to check what `docker build .` would send without a Docker daemon.

The semantics of moby/patternmatcher (what the docker CLI and BuildKit use) and of its
ignorefile reader, written here in Python:
- a line is trimmed; blank lines and lines starting with `#` are skipped; `!` makes an exception;
  the pattern is cleaned like Go's filepath.Clean and a leading `/` dropped;
- `*` matches any run of characters but `/`, `?` one such character, `[...]` a class, `\\` escapes
  the next character, and `**` any number of directories (even none); a pattern that is only
  `**`-free text matches exactly, `text**` is a prefix, `**text` a suffix;
- a path is excluded when the last pattern matching the path itself or any of its parent
  directories is not an exception.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


def _clean(pattern: str) -> str:
    """Go's filepath.Clean on a slash path ("" becomes ".")."""
    cleaned = posixpath.normpath(pattern) if pattern else "."
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def read_patterns(text: str) -> list[str]:
    """The patterns of a .dockerignore, as the ignorefile reader returns them."""
    patterns = []
    for line in text.splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        invert = pattern.startswith("!")
        if invert:
            pattern = pattern[1:].strip()
        if pattern:
            pattern = _clean(pattern)
            if len(pattern) > 1 and pattern.startswith("/"):
                pattern = pattern[1:]
        patterns.append("!" + pattern if invert else pattern)
    return patterns


@dataclass(frozen=True)
class _Pattern:
    text: str
    exclusion: bool
    kind: str  # exact | prefix | suffix | regexp
    regexp: re.Pattern[str] | None

    def match(self, path: str) -> bool:
        if self.kind == "exact":
            return path == self.text
        if self.kind == "prefix":
            return path.startswith(self.text[:-2])
        if self.kind == "suffix":
            suffix = self.text[2:]
            return path.endswith(suffix) or (suffix.startswith("/") and path == suffix[1:])
        assert self.regexp is not None
        return self.regexp.match(path) is not None


def _compile(text: str, exclusion: bool) -> _Pattern:
    """The pattern's kind and, for `regexp`, its expression (Pattern.compile in Go)."""
    regex, kind, i, step = "^", "exact", 0, 0
    while i < len(text):
        ch = text[i]
        i += 1
        if ch == "*" and text[i : i + 1] == "*":
            i += 1
            if text[i : i + 1] == "/":  # "**/" is "**"
                i += 1
            if i >= len(text):  # "**" at the end: everything below
                if kind == "exact":
                    kind = "prefix"
                else:
                    regex, kind = regex + ".*", "regexp"
            else:
                regex, kind = regex + "(.*/)?", "regexp"
            if step == 0:  # "**" first
                kind = "suffix"
        elif ch == "*":
            regex, kind = regex + "[^/]*", "regexp"
        elif ch == "?":
            regex, kind = regex + "[^/]", "regexp"
        elif ch in ".+()|{}$":
            regex += "\\" + ch
        elif ch == "\\":
            if i < len(text):
                regex, kind = regex + "\\" + text[i], "regexp"
                i += 1
            else:
                regex += "\\\\"
        elif ch in "[]":
            regex, kind = regex + ch, "regexp"
        else:
            regex += ch
        step += 1
    compiled = re.compile(regex + "$") if kind == "regexp" else None
    return _Pattern(text=text, exclusion=exclusion, kind=kind, regexp=compiled)


class DockerIgnore:
    """The patterns of one .dockerignore; `excluded(path)` for a slash path relative to the
    context's root."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = [
            _compile(p[1:], True) if p.startswith("!") else _compile(p, False) for p in patterns
        ]

    @classmethod
    def from_file(cls, path: Path) -> DockerIgnore:
        return cls(read_patterns(path.read_text()) if path.is_file() else [])

    def excluded(self, path: str) -> bool:
        path = _clean(path)
        parent = posixpath.dirname(path)
        parents = parent.split("/") if parent else []
        matched = False
        for pattern in self.patterns:
            if pattern.exclusion != matched:
                continue
            hit = pattern.match(path) or any(
                pattern.match("/".join(parents[: i + 1])) for i in range(len(parents))
            )
            if hit:
                matched = not pattern.exclusion
        return matched


def build_context(root: Path, ignore: DockerIgnore) -> set[str]:
    """Every file under `root` that `docker build root` sends (slash paths)."""
    sent = set()
    for path in root.rglob("*"):
        if path.is_file() or path.is_symlink():
            relative = path.relative_to(root).as_posix()
            if not ignore.excluded(relative):
                sent.add(relative)
    return sent
