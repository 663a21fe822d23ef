// The status page's chart, computed here as plain numbers and path strings: the template only places elements
// and escapes attribute values, and never needs `raw`. Bars: origin fetches per minute (errors in red over
// them, right axis); line: hit ratio per minute (left axis, 0–100 %), broken where a minute had no answers.
import type { MinutePoint } from "../observability/metrics";

/**
 * The chart's box in SVG units (the CSS scales it to the page, templates/status.tsx):
 * room for 15 minutes' bars with their labels at the CSS's 11-px text, a third as high.
 */
const WIDTH = 720;
const HEIGHT = 240;
const MARGIN = { left: 48, right: 48, top: 14, bottom: 30 };

const round = (n: number) => Math.round(n * 10) / 10;

/** 1, 2, 5, 10, 20, 50…: a round axis maximum at or above `n`. */
function niceMax(n: number): number {
  if (n <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) if (step * power >= n) return step * power;
  return 10 * power;
}

function minuteLabel(start: number): string {
  const d = new Date(start);
  return `${String(d.getUTCHours()).padStart(2, "0")}:${String(d.getUTCMinutes()).padStart(2, "0")}`;
}

export function buildChart(points: readonly MinutePoint[]) {
  const [right, bottom] = [WIDTH - MARGIN.right, HEIGHT - MARGIN.bottom];
  const plot = { left: MARGIN.left, top: MARGIN.top, right, bottom, width: right - MARGIN.left, height: bottom - MARGIN.top };
  const slot = plot.width / Math.max(1, points.length);
  const maxFetches = niceMax(Math.max(0, ...points.map((p) => p.originFetches)));
  const yRatio = (r: number) => round(plot.bottom - r * plot.height);
  const yCount = (n: number) => round(plot.bottom - (n / maxFetches) * plot.height);
  const centre = (i: number) => round(plot.left + slot * (i + 0.5));

  let ratioPath = "";
  const ratioDots: { cx: number; cy: number; title: string }[] = [];
  const bars: { x: number; y: number; width: number; height: number; errorY: number; errorHeight: number; title: string }[] = [];
  /** Axis labels, positioned for <text> (x, baseline y). */
  const xTicks: { x: number; y: number; label: string }[] = [];
  points.forEach((point, i) => {
    const fromEnd = points.length - 1 - i;
    if (fromEnd % 5 === 0) xTicks.push({ x: centre(i), y: plot.bottom + 18, label: fromEnd === 0 ? "now" : `−${fromEnd} min` });
    const label = fromEnd === 0 ? `${minuteLabel(point.start)} UTC (this minute, so far)` : `${minuteLabel(point.start)} UTC`;
    if (point.hitRatio !== null) {
      const x = centre(i);
      const y = yRatio(point.hitRatio);
      ratioPath += `${points[i - 1]?.hitRatio != null ? "L" : "M"}${x} ${y} `;
      ratioDots.push({ cx: x, cy: y, title: `${label}: hit ratio ${(point.hitRatio * 100).toFixed(1)}% of ${point.answers} answers` });
    }
    const barWidth = round(slot * 0.56);
    const y = yCount(point.originFetches);
    const errorY = yCount(Math.min(point.originErrors, point.originFetches));
    bars.push({
      x: round(centre(i) - barWidth / 2),
      y,
      width: barWidth,
      height: round(plot.bottom - y),
      errorY,
      errorHeight: round(plot.bottom - errorY),
      title: `${label}: ${point.originFetches} origin fetches, ${point.originErrors} errors, ${point.pages} pages`,
    });
  });

  const ratios = points.flatMap((p) => (p.hitRatio === null ? [] : [p.hitRatio]));
  const totalFetches = points.reduce((n, p) => n + p.originFetches, 0);
  const description =
    ratios.length === 0
      ? `No page answers in the last ${points.length} minutes; ${totalFetches} origin fetches.`
      : `Hit ratio per minute from ${(Math.min(...ratios) * 100).toFixed(0)}% to ${(Math.max(...ratios) * 100).toFixed(0)}%; ${totalFetches} origin fetches in the last ${points.length} minutes, at most ${Math.max(...points.map((p) => p.originFetches))} in one minute.`;

  return {
    width: WIDTH,
    height: HEIGHT,
    plot,
    /** SVG path data of the hit-ratio line ("" when no minute had answers). */
    ratioPath: ratioPath.trim(),
    ratioDots,
    bars,
    leftTicks: [0, 0.5, 1].map((r) => ({ x: plot.left - 6, y: round(yRatio(r) + 4), label: `${r * 100}%` })),
    rightTicks: [0, maxFetches / 2, maxFetches].map((n) => ({
      x: plot.right + 6,
      y: round(yCount(n) + 4),
      label: Number.isInteger(n) ? String(n) : n.toFixed(1),
    })),
    xTicks,
    gridLines: [0.25, 0.5, 0.75, 1].map((r) => ({ y: yRatio(r) })),
    /** One sentence for screen readers. */
    description,
    maxFetches,
  };
}
