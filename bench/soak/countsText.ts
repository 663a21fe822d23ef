// Counts by key (answers by status, Redis commands by name) as the soak's
// tables write them: the soak's windows (windowTable.ts) and the floods'
// tables (floodTables.ts).

/** The sum of the counts. */
export const total = (counts: Record<string, number>) => Object.values(counts).reduce((n, c) => n + c, 0);
export const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
/** "200: 1,234, 503: 5": each key and its count. */
export const statusText = (s: Record<string, number>) =>
  Object.entries(s)
    .map(([k, n]) => `${k}: ${fmt(n)}`)
    .join(", ");
/** The most sent commands, as counts or (`per`) per page. */
export const topCommands = (sent: Record<string, number>, per = 1, top = 6) =>
  Object.entries(sent)
    .sort((x, y) => y[1] - x[1])
    .slice(0, top)
    .map(([k, n]) => `${k} ${per === 1 ? fmt(n) : fmt(n / Math.max(1, per), 3)}`)
    .join(", ") || "none";
