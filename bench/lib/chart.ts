// The benchmarks' charts, hand-written SVG, no library: a grouped bar chart on
// a logarithmic or linear axis (bench:peers: groups are scenarios, bars within
// a group are systems; a missing value leaves an "n/a" mark instead of a bar),
// and two panels over time (bench:soak: req/s and p99 per window).

export interface BarSeries {
  name: string;
  color: string;
}

export interface BarChart {
  title: string;
  subtitle: string;
  yLabel: string;
  groups: string[];
  series: BarSeries[];
  /** values[group][series]: null = not run. */
  values: Array<Array<number | null>>;
  /** "log": log10 axis (values > 0); "symlog": log10(1 + v), so 0 has a place; "linear": from 0. */
  scale: "log" | "symlog" | "linear";
  /** Text over each bar. */
  label(value: number): string;
  /** Optional second line under a bar's label (e.g. a marker for errors). */
  note?(group: number, series: number): string | null;
  /** Optional second value per bar drawn as a dark tick across it (e.g. p50 on a p99 bar), and its legend text. */
  marker?: { values: Array<Array<number | null>>; legend: string };
}

const WIDTH = 980;
const HEIGHT = 520;
const MARGIN = { top: 74, right: 24, bottom: 96, left: 78 };

function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** 1, 2 or 5 × a power of ten, at least `raw`. */
function niceStep(raw: number): number {
  const power = 10 ** Math.floor(Math.log10(Math.max(raw, 1e-9)));
  return [1, 2, 5, 10].map((k) => k * power).find((step) => step >= raw) ?? 10 * power;
}

function tickLabel(value: number): string {
  if (value > 0 && value < 1) return String(Math.round(value * 1000) / 1000);
  if (value >= 1_000_000) return `${value / 1_000_000}M`;
  if (value >= 1000) return `${value / 1000}k`;
  return String(value);
}

export function barChartSvg(chart: BarChart): string {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const all = [...chart.values.flat(), ...(chart.marker?.values.flat() ?? [])].filter((v): v is number => v !== null && Number.isFinite(v));
  const positive = all.filter((v) => v > 0);
  const linear = chart.scale === "linear";
  const top = Math.max(...(positive.length ? positive : [1]));
  // Linear: 0 to a round number above the highest value, in 5 steps.
  const step = linear ? niceStep(top / 5) : 1;
  const f =
    chart.scale === "log"
      ? (v: number) => Math.log10(Math.max(v, 1e-9))
      : linear
        ? (v: number) => Math.max(0, v)
        : (v: number) => Math.log10(1 + Math.max(0, v));
  const lowDecade = chart.scale === "log" ? Math.floor(Math.log10(Math.min(...(positive.length ? positive : [1])))) : 0;
  const highDecade = Math.max(lowDecade + 1, Math.ceil(Math.log10(top * 1.0001 + (chart.scale === "symlog" ? 1 : 0))));
  const y0 = chart.scale === "log" ? lowDecade : 0;
  const y1 = linear ? Math.ceil((top * 1.08) / step) * step : highDecade;
  const y = (v: number) => MARGIN.top + plotH - ((f(v) - y0) / (y1 - y0)) * plotH;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${esc(chart.title)}">`,
    `<style>text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;fill:#1a1a1a}.t{font-size:17px;font-weight:600}.s{font-size:12px;fill:#555}.ax{font-size:11px;fill:#444}.g{font-size:12.5px;font-weight:600}.v{font-size:10px}.na{font-size:10px;fill:#888}.lg{font-size:12px}.mk{font-size:9px;fill:#fff;font-weight:600}</style>`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#fff"/>`,
    `<text class="t" x="${MARGIN.left}" y="26">${esc(chart.title)}</text>`,
    `<text class="s" x="${MARGIN.left}" y="45">${esc(chart.subtitle)}</text>`,
  );
  // Grid lines and ticks: decades, plus 0 for symlog.
  const ticks: number[] = [];
  if (chart.scale !== "log") ticks.push(0);
  if (linear) for (let t = step; t <= y1 + step / 1000; t += step) ticks.push(t);
  else for (let dec = chart.scale === "log" ? lowDecade : 0; dec <= highDecade; dec++) ticks.push(10 ** dec);
  for (const tick of ticks) {
    const ty = y(tick);
    out.push(
      `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${ty.toFixed(1)}" y2="${ty.toFixed(1)}" stroke="${tick === ticks[0] ? "#888" : "#e3e3e3"}" stroke-width="1"/>`,
    );
    out.push(`<text class="ax" x="${MARGIN.left - 8}" y="${(ty + 4).toFixed(1)}" text-anchor="end">${tickLabel(tick)}</text>`);
    // 2× and 5× within the decade, lighter, when the axis spans few decades.
    if (!linear && tick > 0 && tick < 10 ** highDecade && highDecade - (chart.scale === "log" ? lowDecade : 0) <= 3) {
      for (const k of [2, 5]) {
        const my = y(tick * k);
        out.push(`<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${my.toFixed(1)}" y2="${my.toFixed(1)}" stroke="#f1f1f1" stroke-width="1"/>`);
        out.push(`<text class="ax" x="${MARGIN.left - 8}" y="${(my + 4).toFixed(1)}" text-anchor="end" fill-opacity="0.6">${tickLabel(tick * k)}</text>`);
      }
    }
  }
  out.push(`<text class="ax" transform="translate(18 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${esc(chart.yLabel)}</text>`);
  // Bars.
  const groupW = plotW / chart.groups.length;
  const barGap = 4;
  const barW = Math.min(44, (groupW - 24) / chart.series.length - barGap);
  const base = y(chart.scale === "log" ? 10 ** lowDecade : 0);
  chart.groups.forEach((group, gi) => {
    const gx = MARGIN.left + gi * groupW;
    const used = chart.series.length * (barW + barGap) - barGap;
    const startX = gx + (groupW - used) / 2;
    chart.series.forEach((series, si) => {
      const value = chart.values[gi]?.[si] ?? null;
      const bx = startX + si * (barW + barGap);
      const cx = bx + barW / 2;
      if (value === null) {
        out.push(`<text class="na" x="${cx.toFixed(1)}" y="${(base - 6).toFixed(1)}" text-anchor="middle">n/a</text>`);
        return;
      }
      const top = Math.min(base, y(Math.max(value, chart.scale === "log" ? 10 ** lowDecade : 0)));
      const h = Math.max(0, base - top);
      out.push(
        `<rect x="${bx.toFixed(1)}" y="${top.toFixed(1)}" width="${barW.toFixed(1)}" height="${Math.max(h, 0.8).toFixed(1)}" fill="${series.color}"><title>${esc(`${series.name} · ${group}: ${chart.label(value)}`)}</title></rect>`,
      );
      out.push(`<text class="v" x="${cx.toFixed(1)}" y="${(top - 4).toFixed(1)}" text-anchor="middle">${esc(chart.label(value))}</text>`);
      const mark = chart.marker?.values[gi]?.[si] ?? null;
      if (mark !== null && mark > 0) {
        const my = Math.min(base, y(mark));
        out.push(
          `<line x1="${(bx + 3).toFixed(1)}" x2="${(bx + barW - 3).toFixed(1)}" y1="${my.toFixed(1)}" y2="${my.toFixed(1)}" stroke="#111" stroke-width="2.5"><title>${esc(`${series.name} · ${group}: ${chart.marker!.legend} ${chart.label(mark)}`)}</title></line>`,
        );
        out.push(`<text class="mk" x="${(bx + barW / 2).toFixed(1)}" y="${(my - 3).toFixed(1)}" text-anchor="middle">${esc(chart.label(mark))}</text>`);
      }
      const note = chart.note?.(gi, si);
      if (note) out.push(`<text class="na" x="${cx.toFixed(1)}" y="${(top - 15).toFixed(1)}" text-anchor="middle">${esc(note)}</text>`);
    });
    // Group name, possibly on two lines.
    const words = group.split(" ");
    const half = Math.ceil(words.length / 2);
    const lines = group.length > 16 ? [words.slice(0, half).join(" "), words.slice(half).join(" ")] : [group];
    lines.forEach((line, li) =>
      out.push(`<text class="g" x="${(gx + groupW / 2).toFixed(1)}" y="${MARGIN.top + plotH + 20 + li * 15}" text-anchor="middle">${esc(line)}</text>`),
    );
  });
  // Legend.
  let lx = MARGIN.left;
  const ly = HEIGHT - 26;
  for (const series of chart.series) {
    out.push(`<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${series.color}"/>`);
    out.push(`<text class="lg" x="${lx + 17}" y="${ly}">${esc(series.name)}</text>`);
    lx += 17 + series.name.length * 7 + 26;
  }
  if (chart.marker) {
    out.push(`<line x1="${lx}" x2="${lx + 14}" y1="${ly - 4}" y2="${ly - 4}" stroke="#111" stroke-width="2.5"/>`);
    out.push(`<text class="lg" x="${lx + 20}" y="${ly}">${esc(chart.marker.legend)}</text>`);
  }
  out.push("</svg>");
  return out.join("\n");
}

// ---------------------------------------------------------------- over time

const PANEL_H = 190;
const LINE_MARGIN = { top: 78, right: 24, left: 78, gap: 46, bottom: 44 };

/** One point per window of the soak: its end (s since the load began), its label, req/s and p99. */
export interface WindowPoint {
  label: string;
  endS: number;
  rps: number;
  p99Ms: number;
}

/** Two panels over time, req/s above p99 ms: the soak's chart. */
export function lineChartSvg(title: string, subtitle: string, windows: WindowPoint[]): string {
  const plotW = WIDTH - LINE_MARGIN.left - LINE_MARGIN.right;
  const height = LINE_MARGIN.top + 2 * PANEL_H + LINE_MARGIN.gap + LINE_MARGIN.bottom;
  const xMax = Math.max(...windows.map((w) => w.endS), 1);
  const x = (s: number) => LINE_MARGIN.left + (s / xMax) * plotW;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="${esc(title)}">`,
    `<style>text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;fill:#1a1a1a}.t{font-size:17px;font-weight:600}.s{font-size:12px;fill:#555}.ax{font-size:11px;fill:#444}.v{font-size:10px}.p{font-size:12.5px;font-weight:600}</style>`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    `<text class="t" x="${LINE_MARGIN.left}" y="26">${esc(title)}</text>`,
    `<text class="s" x="${LINE_MARGIN.left}" y="45">${esc(subtitle)}</text>`,
  ];
  const panels = [
    { name: "req/s", color: "#2b6cb0", value: (w: WindowPoint) => w.rps, label: (v: number) => String(Math.round(v)) },
    { name: "p99 ms", color: "#c05621", value: (w: WindowPoint) => w.p99Ms, label: (v: number) => String(v) },
  ];
  panels.forEach((panel, i) => {
    const top0 = LINE_MARGIN.top + i * (PANEL_H + LINE_MARGIN.gap);
    const yTop = niceStep(Math.max(...windows.map(panel.value)) * 1.1);
    const y = (v: number) => top0 + PANEL_H - (v / yTop) * PANEL_H;
    for (let k = 0; k <= 4; k++) {
      const v = (yTop * k) / 4;
      out.push(
        `<line x1="${LINE_MARGIN.left}" x2="${WIDTH - LINE_MARGIN.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="${k ? "#e3e3e3" : "#888"}"/>`,
      );
      out.push(`<text class="ax" x="${LINE_MARGIN.left - 8}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${+v.toPrecision(3)}</text>`);
    }
    out.push(`<text class="p" x="${LINE_MARGIN.left + 6}" y="${top0 - 8}" fill="${panel.color}">${panel.name}</text>`);
    const points = windows.map((w) => [x(w.endS), y(panel.value(w))] as const);
    out.push(
      `<polyline fill="none" stroke="${panel.color}" stroke-width="2" points="${points.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ")}"/>`,
    );
    windows.forEach((w, j) => {
      const [px, py] = points[j]!;
      out.push(
        `<circle cx="${px.toFixed(1)}" cy="${py.toFixed(1)}" r="3.5" fill="${panel.color}"><title>${esc(`${w.label}: ${panel.label(panel.value(w))} ${panel.name}`)}</title></circle>`,
      );
      if (windows.length <= 40)
        out.push(`<text class="v" x="${px.toFixed(1)}" y="${(py - 7).toFixed(1)}" text-anchor="middle">${panel.label(panel.value(w))}</text>`);
    });
  });
  // Time axis, under the lower panel.
  const axisY = LINE_MARGIN.top + 2 * PANEL_H + LINE_MARGIN.gap;
  const step = niceStep(xMax / 8);
  for (let s = 0; s <= xMax; s += step) out.push(`<text class="ax" x="${x(s).toFixed(1)}" y="${axisY + 16}" text-anchor="middle">${s}</text>`);
  out.push(
    `<text class="ax" x="${LINE_MARGIN.left + plotW / 2}" y="${axisY + 34}" text-anchor="middle">seconds since the load began (one point per window, at its end)</text>`,
  );
  out.push("</svg>");
  return out.join("\n");
}
