"""What a figure writes: PNG, PDF and the CSV of what it plots (`save`), the
notice that stands in for a declared figure without data, and the index of
every figure drawn or not, with its title helpers.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.lines import Line2D

from ...atomic import replacing, write_text
from .style import INDEX, NEUTRAL, STYLE, plt

# --------------------------------------------------------------------------- drawn or not


class NotDrawn(Exception):  # noqa: N818 (an outcome, not an error)
    """Raised by a plot function whose figure has nothing to show; says why."""


class Drawn(list):
    """The paths of a drawn figure, with `notes` on the panels left out."""

    def __init__(self, paths: Iterable[Path] = (), notes: Iterable[str] = ()):
        super().__init__(paths)
        self.notes = list(notes)


@dataclass
class FigureEntry:
    """One figure of `plot_all`: its files, or why it was not drawn."""

    name: str
    files: list[Path] = field(default_factory=list)
    reason: str = ""  # why it was not drawn ("" when it was)
    notes: list[str] = field(default_factory=list)  # panels left out of a drawn figure
    notice: bool = False  # a notice stands in its place (a declared output)

    @property
    def drawn(self) -> bool:
        return not self.reason

    def as_dict(self) -> dict:
        return {"name": self.name, "files": [str(f) for f in self.files],
                "reason": self.reason, "notes": self.notes, "notice": self.notice}

    @classmethod
    def from_dict(cls, d: dict) -> FigureEntry:
        return cls(d["name"], [Path(f) for f in d["files"]], d["reason"], d["notes"],
                   d["notice"])


class FigureIndex(list):
    """The paths `plot_all` wrote (figures and index.md), with `entries`: every
    figure by name, drawn or not."""

    def __init__(self, paths: Iterable[Path], entries: dict[str, FigureEntry]):
        super().__init__(paths)
        self.entries = entries

    @property
    def drawn(self) -> list[str]:
        return [name for name, e in self.entries.items() if e.drawn]


def title_text(width_in: float, main: str, detail: str = "", notes: Iterable[str] = ()) -> str:
    """A figure title wrapped to a figure `width_in` inches wide: `main`, then
    `detail` (what bars and bands are), then the panels left out (`notes`)."""
    notes = list(notes)
    note = ("Left out (no data): " + "; ".join(notes)) if notes else ""
    width = max(40, int(width_in * 14))
    return "\n".join(textwrap.fill(t, width) for t in (main, detail, note) if t)


def figure_title(fig, main: str, detail: str = "") -> None:
    """The figure's title, wrapped to its width."""
    fig.suptitle(title_text(fig.get_figwidth(), main, detail), fontsize=9.5)


DATA_COLUMNS = ["panel", "series", "kind", "x", "y", "low", "high"]
FIGURE_FILES = ("png", "pdf", "csv")  # each drawn figure's files: image, vector, its data


def figure_data(fig) -> pd.DataFrame:
    """What `fig` plots, as a tidy frame (its source data, written beside it as CSV):
    one row per point of every named series (artist gid) of every panel (axes label).

    kind "line": a point (x, y) of a data series or fitted line; "ybar"/"xbar": an
    error bar or interval at (x, y) spanning low..high along y or x; "band": a fit
    band at x from low to high. A marker placed in axes coordinates (an unfinished
    run along the panel's top edge) has y NaN.
    """
    rows = []
    for ax in fig.axes:
        panel = ax.get_label()
        for artist in [*ax.lines, *ax.collections]:
            gid = artist.get_gid()
            if not gid:
                continue
            if isinstance(artist, Line2D):
                data = artist.get_transform() == ax.transData
                for x, y in zip(artist.get_xdata(), artist.get_ydata(), strict=True):
                    rows.append((panel, gid, "line", x, y if data else np.nan, np.nan, np.nan))
            elif isinstance(artist, PolyCollection):
                for path in artist.get_paths():
                    v = pd.DataFrame(path.vertices, columns=["x", "y"]).groupby("x")["y"]
                    rows += [(panel, gid, "band", x, np.nan, lo, hi)
                             for x, lo, hi in zip(v.min().index, v.min(), v.max(), strict=True)]
            elif hasattr(artist, "get_segments"):
                for seg in artist.get_segments():
                    (x0, y0), (x1, y1) = seg[0], seg[-1]
                    if x0 == x1:
                        rows.append((panel, gid, "ybar", x0, (y0 + y1) / 2, min(y0, y1),
                                     max(y0, y1)))
                    else:
                        rows.append((panel, gid, "xbar", (x0 + x1) / 2, y0, min(x0, x1),
                                     max(x0, x1)))
    return pd.DataFrame(rows, columns=DATA_COLUMNS)


def write_image(fig, path: Path) -> None:
    """`fig` as an image file whole or not at all (atomic.replacing), its format
    the file's extension."""
    with replacing(path, kill_at=None) as tmp:
        fig.savefig(tmp, format=Path(path).suffix[1:], dpi=150)


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    with replacing(path, kill_at=None) as tmp:
        frame.to_csv(tmp, index=False)


def save(fig, out_dir: Path, name: str, notes: Iterable[str] = (),
         title_notes: bool = True) -> Drawn:
    """Write `fig` as PNG and PDF, and what it plots as CSV (`figure_data`); `notes`
    (the panels left out, and why) are added under its title (unless `title_notes`
    is False: the title has them already)."""
    notes = list(notes)
    if notes and title_notes:
        old = fig._suptitle.get_text() if fig._suptitle is not None else ""
        note = title_text(fig.get_figwidth(), "", "", notes)
        fig.suptitle(f"{old}\n{note}" if old else note, fontsize=9.5)
        # Room for the added lines, so that the panels keep their size.
        fig.set_figheight(fig.get_figheight() + 0.17 * (note.count("\n") + 1))
    data = figure_data(fig)
    if not (data[["y", "low", "high"]].notna().any(axis=1) & data["x"].notna()).any():
        plt.close(fig)  # only unfinished runs' markers, or nothing: no figure to show
        raise NotDrawn("nothing to plot: no finished run with a measurement feeds it")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        write_image(fig, path)  # constrained layout already fits the margins
        # The layout is solved now: freeze it rather than solve it again for the PDF.
        fig.set_layout_engine("none")
    write_csv(data, out_dir / f"{name}.csv")
    plt.close(fig)
    return Drawn([*paths, out_dir / f"{name}.csv"], notes)


def draw_notice(out_dir: Path, name: str, reason: str) -> list[Path]:
    """A figure-sized notice that `name` was not drawn, and why (no axes)."""
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(6.4, 1.3))
        fig.text(0.03, 0.7, f"{name}: not drawn", fontsize=11, weight="bold")
        fig.text(0.03, 0.45, reason, fontsize=8.5, va="top", wrap=True, color=NEUTRAL)
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = [out_dir / f"{name}.{ext}" for ext in ("png", "pdf")]
        for path in paths:
            write_image(fig, path)
        plt.close(fig)
    # No data: its source data is the header alone.
    write_csv(pd.DataFrame(columns=DATA_COLUMNS), out_dir / f"{name}.csv")
    return [*paths, out_dir / f"{name}.csv"]


def remove_files(out_dir: Path, name: str) -> None:
    """Remove an earlier run's files of a figure that is not drawn now."""
    for ext in FIGURE_FILES:
        (Path(out_dir) / f"{name}.{ext}").unlink(missing_ok=True)


def write_index(entries: dict[str, FigureEntry], out_dir: Path) -> Path:
    """figures/index.md: every figure with its files, or why it was not drawn."""
    drawn = [e for e in entries.values() if e.drawn]
    lines = ["# Figures", "",
             f"{len(drawn)} of {len(entries)} figures drawn. A figure without data is not "
             "drawn; its row says why. A panel without data is left out of its figure.", "",
             "| figure | file | notes |", "|---|---|---|"]
    for e in entries.values():
        if e.drawn:
            files = ", ".join(f"[{p.name}]({p.name})" for p in e.files)
            note = ("panels left out: " + "; ".join(e.notes)) if e.notes else ""
        else:
            files = "not drawn"
            note = e.reason
            if e.notice:
                note += (" (the study's grid should feed this figure, so a notice saying "
                         "this stands in its place)")
        lines.append(f"| {e.name} | {files} | {note.replace('|', '/')} |")
    path = Path(out_dir) / INDEX
    write_text("\n".join(lines) + "\n", path)
    return path

