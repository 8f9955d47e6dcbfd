#!/usr/bin/env python3
"""The fleet dashboard's panels drawn from a live Prometheus into one PNG, without Grafana.

    scripts/dashboard_picture.py --url http://127.0.0.1:9090 --out fleet.png [--minutes 60 | --start T --end T]
        [--step SECONDS] [--dashboard monitoring/grafana/sglang-fleet.json] [--require-data]

Each panel of the dashboard (rows left out) is queried over the window (its template variables, such as
$sglang_instance, select every value: `.*`) and drawn in a grid, in the dashboard's order, titled as the panel:
time series and state timelines as lines, a stat as its series' last values, a table as the labels of its series'
last samples, with the legends the dashboard's targets give. A panel whose queries return nothing says "no data" and
is named on stderr; the exit code is then 0, or 1 with --require-data. T is Unix seconds or ISO 8601 (UTC unless it
says otherwise). Exit 2 when Prometheus could not be asked.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import sys
import time as clock

import matplotlib
matplotlib.use("Agg")  # no display: a file only
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402  pylint: disable=wrong-import-position
from matplotlib.figure import Figure  # noqa: E402  pylint: disable=wrong-import-position
import matplotlib.dates as mdates  # noqa: E402  pylint: disable=wrong-import-position

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # loaded by path, not run: find the siblings
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
from prometheus_api import PrometheusError, instant, query_range  # noqa: E402  pylint: disable=wrong-import-position
from prometheus_series import DASHBOARD, dashboard_panels  # noqa: E402  pylint: disable=wrong-import-position

COLUMNS = 3
PANEL_SIZE = (5.6, 3.4)  # inches per panel
LINES = ("timeseries", "graph", "state-timeline", "statetimeline", "status-history", "barchart")
_LEGEND = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


def substitute(expr, variables, step, window):
    """EXPR with the dashboard's template VARIABLES ($name, ${name}, ${name:format}, [[name]]) selecting every value
    (`.*`) and Grafana's own intervals from STEP and WINDOW (seconds)."""
    builtins = {"__rate_interval": "%ds" % max(4 * step, 60), "__interval": "%ds" % step,
                "__range": "%ds" % window, "__interval_ms": "%d" % (step * 1000), "__range_s": "%d" % window}

    def value(match):
        name = next(group for group in match.groups() if group)
        if name in builtins:
            return builtins[name]
        return ".*" if name in variables else match.group(0)
    return re.sub(r"\$\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[^}]*)?\}|\[\[([a-zA-Z_][a-zA-Z0-9_]*)\]\]|"
                  r"\$([a-zA-Z_][a-zA-Z0-9_]*)", value, expr)


def legend(target, labels):
    """The target's legendFormat with {{label}} taken from the series' LABELS, or the series' own labels."""
    form = target.get("legendFormat")
    if isinstance(form, str) and form.strip() and form != "__auto":
        return _LEGEND.sub(lambda match: labels.get(match.group(1), ""), form).strip()
    shown = ", ".join('%s="%s"' % (key, value) for key, value in sorted(labels.items()) if key != "__name__")
    return "%s{%s}" % (labels.get("__name__", ""), shown)


def fetch_panel(url, panel, variables, start, end, step, timeout):
    """[(target, labels, samples)...] of every target of PANEL: a table's (or an instant target's) at END, the
    others over the window."""
    found = []
    for target in panel.get("targets") or []:
        if not isinstance(target, dict) or not isinstance(target.get("expr"), str) or not target["expr"].strip():
            continue
        expr = substitute(target["expr"], variables, step, end - start)
        if panel.get("type") == "table" or (target.get("instant") and not target.get("range")):
            series = instant(url, expr, end, timeout)
        else:
            series = query_range(url, expr, start, end, step, timeout)
        found += [(target, labels, samples) for labels, samples in series if samples]
    return found


def _number(value, unit):
    if math.isnan(value):
        return "NaN"
    if unit == "percentunit":
        return "%.1f%%" % (value * 100)
    if unit == "s":
        for limit, size, name in ((120, 1, "s"), (7200, 60, "min"), (172800, 3600, "h"), (math.inf, 86400, "d")):
            if abs(value) < limit:
                return "%.0f %s" % (value / size, name)
    return "%.4g" % value


def _times(samples):
    return [datetime.datetime.fromtimestamp(time, datetime.timezone.utc) for time, _ in samples]


def _draw_lines(axes, panel, series, start, end):
    steps = panel.get("type") in ("state-timeline", "statetimeline", "status-history")
    for target, labels, samples in series:
        axes.plot(_times(samples), [value for _, value in samples], label=legend(target, labels),
                  drawstyle="steps-post" if steps else "default", linewidth=1.2)
    # The whole window on every panel, so series that began late line up with the others.
    axes.set_xlim(*_times([(start, None), (end, None)]))
    axes.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=datetime.timezone.utc))
    axes.tick_params(labelsize=7)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=6, loc="upper left", frameon=False)


def _draw_stat(axes, panel, series):
    unit = (panel.get("fieldConfig") or {}).get("defaults", {}).get("unit")
    lines = ["%s: %s" % (legend(target, labels), _number(samples[-1][1], unit)) for target, labels, samples in series]
    axes.text(0.5, 0.5, "\n".join(lines[:6]), ha="center", va="center", fontsize=16 if len(lines) < 3 else 11,
              transform=axes.transAxes)
    axes.set_axis_off()


def _cell(value, width=24):
    """VALUE cut to WIDTH characters (a commit hash would push the table over its neighbours)."""
    return value if len(value) <= width else value[:width - 1] + "\u2026"


def _draw_table(axes, series):
    columns = sorted({key for _, labels, _ in series for key in labels if key != "__name__"})
    cells = [[_cell(labels.get(key, "")) for key in columns] for _, labels, _ in series]
    axes.set_axis_off()
    drawn = axes.table(cellText=cells[:12], colLabels=columns, loc="upper center", cellLoc="left")
    drawn.auto_set_font_size(False)
    drawn.set_fontsize(6)
    drawn.auto_set_column_width(list(range(len(columns))))


def render(url, dashboard, out, start, end, step, timeout=30.0):
    """Draw every panel of DASHBOARD from the Prometheus at URL over [START, END] into the PNG OUT:
    [(title, has_data)...] in the dashboard's order."""
    panels = dashboard_panels(dashboard)
    variables = {variable.get("name") for variable in (dashboard.get("templating") or {}).get("list") or []
                 if isinstance(variable, dict)}
    rows = max(1, -(-len(panels) // COLUMNS))
    figure = Figure(figsize=(PANEL_SIZE[0] * COLUMNS, PANEL_SIZE[1] * rows + 0.6), dpi=100)
    FigureCanvasAgg(figure)
    window = "%s to %s UTC" % tuple(datetime.datetime.fromtimestamp(moment, datetime.timezone.utc)
                                    .strftime("%Y-%m-%d %H:%M") for moment in (start, end))
    figure.suptitle("%s (%s)" % (dashboard.get("title", "dashboard"), window), fontsize=12)
    drawn = []
    for index, panel in enumerate(panels):
        axes = figure.add_subplot(rows, COLUMNS, index + 1)
        title = str(panel.get("title") or "(untitled)")
        axes.set_title(title, fontsize=9)
        series = fetch_panel(url, panel, variables, start, end, step, timeout)
        if not series:
            axes.text(0.5, 0.5, "no data", ha="center", va="center", fontsize=14, color="grey",
                      transform=axes.transAxes)
            axes.set_xticks([])
            axes.set_yticks([])
        elif panel.get("type") == "stat":
            _draw_stat(axes, panel, series)
        elif panel.get("type") == "table":
            _draw_table(axes, series)
        else:
            _draw_lines(axes, panel, series, start, end)
        drawn.append((title, bool(series)))
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.6 / (PANEL_SIZE[1] * rows + 0.6)))
    figure.savefig(out, format="png")
    return drawn


def moment(text):
    """Unix seconds from TEXT: a number, or ISO 8601 (UTC where it names no zone)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError("%r is neither Unix seconds nor ISO 8601" % text) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.timestamp()


def window_of(args):
    """(start, end, step) from the arguments: --start/--end, or the last --minutes; step --step or 1/240 of it."""
    end = args.end if args.end is not None else clock.time()
    start = args.start if args.start is not None else end - args.minutes * 60
    if not (math.isfinite(start) and math.isfinite(end)) or start >= end:
        raise ValueError("the window needs a start before its end (finite times)")
    step = args.step if args.step is not None else float(max(15, round((end - start) / 240)))
    if not math.isfinite(step) or step <= 0 or (end - start) / step > 11000:
        raise ValueError("--step must be positive and give at most 11000 points over the window (Prometheus' limit)")
    return start, end, step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="the Prometheus to query, e.g. http://127.0.0.1:9090")
    parser.add_argument("--out", required=True, help="the PNG to write")
    parser.add_argument("--dashboard", default=DASHBOARD, help="the dashboard JSON (default: the collection's)")
    parser.add_argument("--minutes", type=float, default=60.0, help="the window: the last MINUTES (default 60)")
    parser.add_argument("--start", type=moment, help="the window's start (instead of --minutes)")
    parser.add_argument("--end", type=moment, help="the window's end (default: now)")
    parser.add_argument("--step", type=float, help="seconds between points (default: the window / 240, >= 15)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per query (default 30)")
    parser.add_argument("--require-data", action="store_true", help="exit 1 when a panel has no data")
    args = parser.parse_args(argv)
    try:
        start, end, step = window_of(args)
        with open(args.dashboard, encoding="utf-8") as handle:
            dashboard = json.load(handle)
        if not isinstance(dashboard, dict):
            raise ValueError("%s is not a dashboard" % args.dashboard)
        drawn = render(args.url, dashboard, args.out, start, end, step, args.timeout)
    except (OSError, ValueError, PrometheusError) as error:
        print("dashboard_picture: %s" % error, file=sys.stderr)
        return 2
    empty = [title for title, has_data in drawn if not has_data]
    for title in empty:
        print("no data: %s" % title, file=sys.stderr)
    print("wrote %s: %d panels, %d without data" % (args.out, len(drawn), len(empty)))
    return 1 if empty and args.require_data else 0


if __name__ == "__main__":
    sys.exit(main())
