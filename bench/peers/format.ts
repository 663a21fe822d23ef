// How bench:peers' report writes its figures: numbers, milliseconds, ratios,
// shares, Markdown tables, and links to the method in bench/peers/README.md.

export const num = (n: number) => Math.round(n).toLocaleString("en-US");
export const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
export const x = (v: number | null) => (v === null || !Number.isFinite(v) ? "–" : `${v.toFixed(2)}×`);
export const f3 = (v: number) => (v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3));
export const pct = (share: number) => `${(share * 100).toFixed(share > 0 && share < 0.001 ? 3 : 2)}%`;

/** Milliseconds in a chart's bar label: seconds from 1,000 on. */
export function compactMs(v: number): string {
  if (v >= 1000) return `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)} s`;
  return `${v >= 10 ? v.toFixed(0) : v.toFixed(1)}`;
}

/** A Markdown table: the first `left` columns left-aligned, the others right-aligned. */
export function mdTable(columns: string[], body: string[][], left: number): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(columns), line(columns.map((_, i) => (i < left ? "---" : "---:"))), ...body.map(line)].join("\n");
}

export const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);

/** The largest counts of `o` per page, "name n, name n, …". */
export const split = (o: Record<string, number>, pages: number, top = 8) =>
  Object.entries(o)
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([k, n]) => `${k} ${f3(n / Math.max(1, pages))}`)
    .join(", ") || "none";

/** A link from bench/results/peers.md to a section of the method (bench/peers/README.md). */
export const method = (text: string, anchor: string) => `[${text}](../peers/README.md#${anchor})`;
