"""The HTML of a sweep report (draw nothing, compute nothing): run table, captioned figures, cells, spec.

:mod:`anchorlab.report` gathers the tables and figures; this module turns them
into one self-contained page (relative links to the PNGs beside it and to each
run's files in ``../runs/<run_id>/``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

STATUS_COLORS = {"finished": "#1a7f37", "stopped_early": "#0969da", "diverged": "#bc4c00", "failed": "#cf222e",
                 "running": "#8250df", "pending": "#6e7781"}
CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1260px;margin:24px auto;padding:0 16px;
     color:#1f2328;line-height:1.45}
h1{margin-bottom:4px} h2{margin-top:32px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.meta{color:#57606a;margin-top:0}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:right;white-space:nowrap}
th{background:#f6f8fa;white-space:normal;vertical-align:bottom} td.l,th.l{text-align:left}
.scroll{overflow-x:auto}
tr:nth-child(even) td{background:#fafbfc}
.status{font-weight:600} .files{font-size:11px} .err{color:#cf222e;white-space:normal;max-width:420px;text-align:left;font-size:12px}
figure{margin:18px 0;padding:10px;border:1px solid #d0d7de;border-radius:6px}
figure img{max-width:100%;display:block;margin:auto}
figcaption{font-size:14px;color:#1f2328;margin-top:8px} figcaption b{color:#000}
pre{background:#f6f8fa;padding:10px;border-radius:6px;font-size:12px;overflow-x:auto}
.note{font-size:13px;color:#57606a}
"""


@dataclass(frozen=True)
class Fig:
    """A figure file (PNG beside the page) and what it shows."""

    path: Path
    caption: str


def _esc(v: Any) -> str:
    return html.escape(str(v))


def _num(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < 1e4 else f"{v:.3g}"
    return _esc(v)


def _link(href: str, text: str) -> str:
    return f'<a href="{_esc(href)}">{_esc(text)}</a>'


def run_table_html(runs: pd.DataFrame, axes: Sequence[str], metrics: Sequence[str], source: str,
                   curves: Mapping[str, str]) -> str:
    """One row per run: id (linked to its curve) and its files, status, axis values, headline metrics
    (``source``), wall time, and the last line of the error of a failed run.

    ``runs`` has run_id, status, run_dir (relative to the sweep folder), wall_seconds,
    error, the axes and the metrics; ``curves`` maps run_id -> curve PNG (relative to the page).
    """
    has_err = "error" in runs.columns and runs.error.map(lambda e: isinstance(e, str) and bool(e.strip())).any()
    head = (["run", "status"] + list(axes) + [f"{m} ({source})" for m in metrics]
            + ["wall time (s)"] + (["error"] if has_err else []))
    rows = []
    for d in runs.to_dict("records"):
        rid, st = str(d["run_id"]), str(d["status"])
        color = STATUS_COLORS.get(st, "#1f2328")
        links = [_link(curves[rid], "curves")] if rid in curves else []
        rd = d.get("run_dir")
        if isinstance(rd, str) and rd:
            links += [_link(f"../{rd}/final.json", "final.json"), _link(f"../{rd}/metrics.jsonl", "metrics")]
        err = d.get("error")
        err = (str(err).strip().splitlines() or [""])[-1][:200] if isinstance(err, str) and err else ""
        cells = ([f'<td class="l"><code>{_esc(rid)}</code><br><span class="files">{" · ".join(links)}</span></td>',
                  f'<td class="l status" style="color:{color}">{_esc(st)}</td>']
                 + [f"<td>{_num(d.get(a), 4)}</td>" for a in axes]
                 + [f"<td>{_metric(m, d.get(m))}</td>" for m in metrics]
                 + [f"<td>{_num(d.get('wall_seconds'), 1)}</td>"]
                 + ([f'<td class="err">{_esc(err)}</td>'] if has_err else []))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    ths = "".join(f'<th class="{"l" if h in ("run", "status", "error") else ""}">{_esc(h)}</th>' for h in head)
    return f"<div class='scroll'><table><thead><tr>{ths}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"


def _metric(name: str, v: Any) -> str:
    """Losses with 3 significant digits (they span decades), other metrics with 3 decimals."""
    if name.endswith("loss") and isinstance(v, float) and math.isfinite(v):
        return f"{v:.3g}"
    return _num(v)


def figure_html(fig: Fig, number: int, root: Path) -> str:
    rel = fig.path.relative_to(root)
    return (f'<figure id="fig{number}"><a href="{_esc(rel)}"><img src="{_esc(rel)}" alt="{_esc(fig.caption[:80])}">'
            f"</a><figcaption><b>Figure {number}.</b> {_esc(fig.caption)}</figcaption></figure>")


def spec_yaml(spec: Mapping[str, Any]) -> tuple[str, str]:
    """(the spec without its base, the base config) as YAML text."""
    plain = {k: v for k, v in spec.items() if k != "base"}
    base = spec.get("base") or {}
    dump = lambda x: yaml.safe_dump(x, sort_keys=False, default_flow_style=None, width=100)  # noqa: E731
    return dump(plain), (dump(base) if base else "")


def cells_html(cells: pd.DataFrame) -> str:
    cols = [c for c in cells.columns if "/" not in str(c)]
    return cells[cols].to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="–", border=0)


SOURCES = {"best": "its best value over the evaluations of its training (the maximum of an accuracy, the "
                   "minimum of a loss)", "final": "its value at its last evaluation"}


def run_table_note(n_runs: int, source: str, definition: str) -> str:
    """What the run table's rows and values are, and how the cells below differ from them."""
    return (f"One row per run of the sweep ({n_runs}, failed and unfinished ones included), sorted by the axes; "
            f"each metric column holds that run's own value, {SOURCES.get(source, source)}, nothing averaged. "
            f"The cells further down aggregate these runs: {definition}")


def page(title: str, meta: Sequence[str], run_table: str, figures: Sequence[Fig], cells: pd.DataFrame,
         cells_title: str, definition: str, spec: Mapping[str, Any], root: Path, run_note: str = "") -> str:
    """The whole page."""
    spec_text, base_text = spec_yaml(spec)
    parts = [f"<h1>{_esc(title)}</h1>"] + [f'<p class="meta">{m}</p>' for m in meta]
    parts.append("<h2>Runs</h2>" + run_table)
    parts.append(f'<p class="note">{_esc(run_note or "Metric values in this table: " + definition)}</p>')
    if figures:
        parts.append("<h2>Figures</h2>")
        parts += [figure_html(f, i, root) for i, f in enumerate(figures, 1)]
    parts.append(f"<h2>{_esc(cells_title)}</h2><div class='scroll'>" + cells_html(cells) + "</div>"
                 + '<p class="note">Also in <a href="cells.csv">cells.csv</a>.</p>')
    parts.append("<h2>Sweep spec</h2><pre>" + _esc(spec_text) + "</pre>")
    if base_text:
        parts.append("<details><summary>Base config (before <code>set</code> and the axes)</summary><pre>"
                     + _esc(base_text) + "</pre></details>")
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{_esc(title)} · anchorlab report</title><style>{CSS}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
