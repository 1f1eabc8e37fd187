"""The report as one self-contained HTML page (inline CSS and SVG, no network), a markdown summary and
JSON."""
from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import Any

from tilecraft.report.sections import Section, Table

_BADGE = {"measured": ("measured on this GPU", "#1a7f37"), "interpreter": ("Triton interpreter: correctness only", "#9a6700"),
          "compiled": ("compiler report, no GPU", "#0969da"), "model": ("model, not measured", "#8250df"),
          "none": ("", "#57606a")}
_STATUS = {"ok": ("ok", "#1a7f37"), "failed": ("FAILED", "#cf222e"), "skipped": ("skipped", "#57606a")}

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
main{max-width:1180px;margin:0 auto;padding:16px 24px 48px}
header{background:#0d1117;color:#e6edf3;padding:18px 24px}
header h1{margin:0 0 4px;font-size:22px} header p{margin:2px 0;color:#9da7b3;font-size:13px}
section{background:#fff;border:1px solid #d0d7de;border-radius:8px;margin:16px 0;padding:12px 18px}
h2{font-size:17px;margin:4px 0 8px} h3{font-size:14px;margin:12px 0 6px}
.badge{display:inline-block;font-size:11px;color:#fff;border-radius:10px;padding:1px 8px;margin-left:6px;vertical-align:middle}
.msg{font-size:13px;color:#57606a} .note{font-size:12.5px;color:#57606a;margin:4px 0}
table{border-collapse:collapse;font-size:12px;margin:6px 0 4px;display:block;overflow-x:auto}
th,td{border-bottom:1px solid #eaeef2;padding:3px 8px;text-align:right;white-space:nowrap}
th{background:#f6f8fa;position:sticky;top:0} td:first-child,th:first-child,td.t{text-align:left}
caption{caption-side:bottom;text-align:left;font-size:11.5px;color:#57606a;padding-top:3px;white-space:normal}
figure{margin:8px 0} figure svg{max-width:100%;height:auto} figcaption{font-size:11.5px;color:#57606a}
nav a{margin-right:12px;font-size:13px;color:#0969da;text-decoration:none}
.summary{display:table;width:100%} .summary td{text-align:left} .summary td:nth-child(4){white-space:normal}
"""

# Runs in the browser: counts plots that really drew (non-zero size) and tables with rows, and writes
# them on <body>, so a headless browser test can read what rendered.
_SCRIPT = """
window.addEventListener('load',function(){
  var svgs=[].slice.call(document.querySelectorAll('figure.plot svg'));
  var drawn=svgs.filter(function(s){var r=s.getBoundingClientRect();return r.width>50&&r.height>50;}).length;
  var tables=[].slice.call(document.querySelectorAll('table')).filter(function(t){return t.rows.length>1;}).length;
  document.body.setAttribute('data-plots-drawn',String(drawn));
  document.body.setAttribute('data-plots',String(svgs.length));
  document.body.setAttribute('data-tables',String(tables));
  document.body.setAttribute('data-rendered','yes');
});
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _badge(text: str, color: str) -> str:
    return f'<span class="badge" style="background:{color}">{_e(text)}</span>' if text else ""


_NUMERIC = re.compile(r"^[-+–]?[0-9.,]*[0-9][0-9.,eE+\-]*\s*(%|×|ms|s|B|KiB|MiB|GiB|MB)?$|^[–-]$")


def _cell(c: object) -> str:
    """A table cell: numbers right-aligned (the CSS default), text left-aligned."""
    text = str(c)
    return f"<td>{_e(text)}</td>" if _NUMERIC.match(text.strip()) else f'<td class="t">{_e(text)}</td>'


def _table_html(t: Table) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in t.rows)
    cap = f"<caption>{_e(t.caption)}</caption>" if t.caption else ""
    return f"<h3>{_e(t.title)}</h3><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _section_html(s: Section) -> str:
    src_text, src_color = _BADGE.get(s.source, _BADGE["none"])
    st_text, st_color = _STATUS[s.status]
    parts = [(f'<section id="{_e(s.key)}" data-section="{_e(s.key)}" data-status="{_e(s.status)}" '
              f'data-source="{_e(s.source)}">'),
             f"<h2>{_e(s.title)}{_badge(src_text, src_color)}{_badge(st_text, st_color)}</h2>"]
    if s.message:
        parts.append(f'<p class="msg">{_e(s.message)}</p>')
    parts += [f'<p class="note">{_e(n)}</p>' for n in s.notes]
    for f in s.figures:
        cap = f"<figcaption>{_e(f.caption)}</figcaption>" if f.caption else ""
        parts.append(f'<figure class="plot" data-kind="{_e(f.kind)}">{f.svg}{cap}</figure>')
    parts += [_table_html(t) for t in s.tables]
    parts.append(f'<p class="note">{s.seconds:.1f} s</p></section>')
    return "\n".join(parts)


def render_html(sections: Sequence[Section], meta: dict) -> str:
    title = f"tilecraft report: {meta.get('device', '')}"
    summary_rows = "".join(
        f'<tr><td><a href="#{_e(s.key)}">{_e(s.title)}</a></td><td>{_badge(*_STATUS[s.status])}</td>'
        f"<td>{_e(_BADGE[s.source][0])}</td><td>{_e(s.message)}</td><td>{s.seconds:.1f}</td></tr>" for s in sections)
    summary = ('<section id="summary" data-section="summary"><h2>Summary</h2><table class="summary"><thead><tr>'
               "<th>section</th><th>status</th><th>numbers are</th><th>message</th><th>s</th></tr></thead>"
               f"<tbody>{summary_rows}</tbody></table></section>")
    head = (f"<header><h1>{_e(title)}</h1><p>{_e(meta.get('mode', ''))} run · {_e(meta.get('date', ''))} · "
            f"commit {_e(meta.get('commit', ''))} · torch {_e(meta.get('torch', ''))} · triton "
            f"{_e(meta.get('triton', ''))}</p><p>{_e(meta.get('headline', ''))}</p></header>")
    body = "\n".join(_section_html(s) for s in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{_CSS}</style>'
            f"<script>{_SCRIPT}</script></head><body>{head}<main>{summary}\n{body}</main></body></html>\n")


def _md_table(t: Table) -> str:
    def cell(c: Any) -> str:
        return str(c).replace("|", "\\|")
    lines = [f"**{t.title}**", "", "| " + " | ".join(cell(c) for c in t.columns) + " |",
             "|" + "|".join("---" for _ in t.columns) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in t.rows]
    if t.caption:
        lines += ["", f"_{t.caption}_"]
    return "\n".join(lines) + "\n"


def render_markdown(sections: Sequence[Section], meta: dict) -> str:
    out = [f"# tilecraft report: {meta.get('device', '')}", "",
           (f"{meta.get('mode', '')} run, {meta.get('date', '')}, commit {meta.get('commit', '')}, "
            f"torch {meta.get('torch', '')}, triton {meta.get('triton', '')}."), ""]
    if meta.get("headline"):
        out += [meta["headline"], ""]
    out += ["| section | status | numbers are | message |", "|---|---|---|---|"]
    out += [f"| {s.title} | {s.status} | {_BADGE[s.source][0] or '–'} | {s.message} |" for s in sections]
    for s in sections:
        out += ["", f"## {s.title}", "", f"_{s.status}; {_BADGE[s.source][0] or 'no numbers'}_", ""]
        if s.message:
            out += [s.message, ""]
        out += [*s.notes, ""] if s.notes else []
        out += [_md_table(t) for t in s.tables]
    return "\n".join(out) + "\n"


def render_json(sections: Sequence[Section], meta: dict) -> str:
    from tilecraft.bench.harness import json_safe

    doc = {"meta": meta, "sections": [s.as_dict() for s in sections]}
    return json.dumps(json_safe(doc), indent=1, default=str, allow_nan=False)
