"""Charts of the benchmarks' latest figures for the documentation (docs/performance.md).

Reads ``benchmarks/figures/*.json`` (``realistic.json`` is ``bench_realistic.py --json``'s
output; ``spark_read.json`` records ``bench_spark_read.py``'s ratios) and writes one SVG bar
chart per file into ``docs/images/perf/``. The SVG is written by hand (no plotting library),
so the same figures always give the same bytes; ``tests/docs/test_docs_site.py`` checks that
the committed charts match the figures.

    python benchmarks/charts.py [--out docs/images/perf]

After a new benchmark run: ``python benchmarks/bench_realistic.py --json
benchmarks/figures/realistic.json`` (then add its ``source``/``measured`` notes back), or
edit ``spark_read.json``, and run this script.
"""

from __future__ import annotations

import argparse
import json
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "benchmarks" / "figures"
OUT = ROOT / "docs" / "images" / "perf"

WIDTH, LABEL_W, ROW_H, TOP, SCALE_MAX = 760, 260, 26, 58, 2.0
PLOT_W = WIDTH - LABEL_W - 60
COLORS = {"a": "#3f51b5", "b": "#9fa8da", "ref": "#c62828"}
REALISTIC = ["write", "full scan", "url column", "filter", "take 1000"]


def _x(ratio: float) -> float:
    return LABEL_W + PLOT_W * min(ratio, SCALE_MAX) / SCALE_MAX


def _svg(title: str, subtitle: str, rows: list[tuple[str, list[tuple[float, float, str]]]],
         legend: list[tuple[str, str]]) -> str:
    """A horizontal bar chart: per row, bars ``(low, high, color)``; ratio 1.0 marked."""
    bars_per_row = max(len(b) for _, b in rows)
    row_h = ROW_H * bars_per_row + 10
    height = TOP + row_h * len(rows) + 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="15" font-weight="bold">{escape(title)}</text>',
           f'<text x="10" y="38" fill="#555">{escape(subtitle)}</text>']
    for tick in (0.0, 0.5, 1.0, 1.5, 2.0):
        x = _x(tick)
        color, dash = (COLORS["ref"], "") if tick == 1.0 else ("#ddd", ' stroke-dasharray="3,3"')
        out.append(f'<line x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{TOP + row_h * len(rows)}" '
                   f'stroke="{color}"{dash}/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + row_h * len(rows) + 16}" text-anchor="middle">{tick:.1f}x</text>')
    for i, (label, bars) in enumerate(rows):
        y0 = TOP + i * row_h
        out.append(f'<text x="{LABEL_W - 8}" y="{y0 + row_h / 2 + 4:.1f}" text-anchor="end">{escape(label)}</text>')
        for j, (low, high, color) in enumerate(bars):
            y = y0 + 5 + j * ROW_H
            out.append(f'<rect x="{LABEL_W}" y="{y}" width="{_x(low) - LABEL_W:.1f}" height="{ROW_H - 8}" '
                       f'fill="{color}"/>')
            if high > low:  # the spread between runs
                out.append(f'<rect x="{_x(low):.1f}" y="{y}" width="{_x(high) - _x(low):.1f}" height="{ROW_H - 8}" '
                           f'fill="{color}" fill-opacity="0.45"/>')
            text = f"{low:.2f}x" if high == low else f"{low:.2f}-{high:.2f}x"
            out.append(f'<text x="{_x(high) + 4:.1f}" y="{y + ROW_H - 12}">{text}</text>')
    ly = TOP + row_h * len(rows) + 36
    for k, (name, color) in enumerate(legend):
        lx = LABEL_W + k * 220
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{lx + 18}" y="{ly}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def realistic_chart(figures: dict) -> str:
    """CPU time of lance_format over pylance's, per workload, on each engine's table."""
    rows = []
    for work in REALISTIC:
        if work == "write":
            ratio = figures["write-cpu/ours"] / figures["write-cpu/pylance"]
            rows.append(("write", [(ratio, ratio, COLORS["a"])]))
            continue
        bars = []
        for writer, color in (("ours-written", COLORS["a"]), ("pylance-written", COLORS["b"])):
            ratio = figures[f"{work}-cpu/{writer}/ours"] / figures[f"{work}-cpu/{writer}/pylance"]
            bars.append((ratio, ratio, color))
        rows.append((work, bars))
    return _svg(f"lance_format / pylance, CPU time ({figures['rows']:,} realistic rows, file version "
                f"{figures['version']})", "below 1.0x: lance_format used less CPU than pylance", rows,
                [("table written by lance_format", COLORS["a"]), ("table written by pylance", COLORS["b"])])


def spark_read_chart(figures: dict) -> str:
    """Spark reads of a Lance table against Spark's parquet read, without and with the settings."""
    rows = []
    for series in figures["series"]:
        bars = [(*series["without"], COLORS["a"])]
        if series.get("with"):
            bars.append((*series["with"], COLORS["b"]))
        rows.append((series["label"], bars))
    return _svg("Spark reads: CPU time against Spark's parquet read (3M rows)",
                "1.0x = parquet's CPU; light part of a bar: the spread between runs", rows,
                [("default session", COLORS["a"]), ("with the three scan settings", COLORS["b"])])


CHARTS = {"realistic": realistic_chart, "spark_read": spark_read_chart}


def render(out: Path) -> list[Path]:
    """Write every chart into ``out``; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, chart in CHARTS.items():
        figures = json.loads((FIGURES / f"{name}.json").read_text())
        path = out / f"{name}.svg"
        path.write_text(chart(figures))
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    for path in render(parser.parse_args().out):
        print(path)


if __name__ == "__main__":
    main()
