// A V8 CPU profile (DevTools `Profiler.stop`) of the worker, summarised: self
// time per function and per part of the request path. Functions are placed by
// the module they come from, read off the bundle's `// src/…` and
// `// node_modules/…` markers (esbuild writes one before each module).

export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number; children?: number[] }[];
  samples?: number[];
  timeDeltas?: number[];
  startTime: number;
  endTime: number;
}

/** Parts of the request path, first match wins: [label, module path pattern]. */
const PARTS: [string, RegExp][] = [
  // Before routing: hono/jsx and hono/html are the render's, the rest of hono the router's.
  ["render (view model, templates, hono/jsx and hono/html)", /^(src\/render\/|templates\/|node_modules\/hono\/dist\/(jsx|helper\/html|utils\/html)\b)/],
  ["routing (Hono)", /^node_modules\/hono\//],
  ["HTTP handlers, headers", /^src\/(http|app|index)/],
  [
    "cache read (read path, L1)",
    /^(src\/cache\/(readThrough|pageSteps|pageRequest|l1|served|entry|hotness|keys|fill\/(flights|rejections|fill|lockWait)|l2\/fillBatch)|node_modules\/lru-cache\/)/,
  ],
  ["L2 (client, decode, breaker)", /^(src\/cache\/l2\/(codec|l2|shardedL2|ring)|node_modules\/@upstash\/|node_modules\/uncrypto)/],
  ["purge judging", /^src\/invalidation\//],
  ["origin client, validation", /^(src\/origin\/|node_modules\/valibot\/)/],
  ["known-ids filter", /^src\/knownIds\//],
  ["metrics, logs", /^src\/observability\//],
  ["admission, departures (overload)", /^src\/overload\//],
  ["Workers rules (leases, limiter, gate, breaker)", /^src\/shared\//],
  ["other tier code", /^src\//],
  ["other libraries", /^node_modules\//],
];

/** V8's pseudo-functions: where no JavaScript of ours ran. */
const PSEUDO: Record<string, string> = {
  "(garbage collector)": "garbage collection",
  "(program)": "runtime outside JavaScript (workerd: I/O, streams, HTTP)",
  "(idle)": "idle",
  "(root)": "idle",
};

export interface Summary {
  /** Samples × the sampling interval, ms (idle included). */
  totalMs: number;
  idleMs: number;
  parts: { part: string; ms: number }[];
  functions: { name: string; module: string; ms: number }[];
}

/** Module start lines of a bundle (0-based), for `moduleAt`. */
function bundleModules(bundle: string): { line: number; module: string }[] {
  const starts: { line: number; module: string }[] = [];
  bundle.split("\n").forEach((text, line) => {
    const marker = /^\/\/ ((?:src|node_modules|templates)\/\S+)$/.exec(text);
    if (marker) starts.push({ line, module: marker[1]! });
  });
  return starts;
}

function moduleAt(starts: { line: number; module: string }[], line: number): string {
  let lo = 0;
  let hi = starts.length - 1;
  let found = "";
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid]!.line <= line) {
      found = starts[mid]!.module;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/**
 * `intervalUs`: the sampling interval asked for. Each sample counts for that
 * long: the recorded time deltas are not used, because workerd takes no
 * sample while its thread waits for I/O, and the delta after the last sample
 * before such a wait would charge the whole wait to whatever ran last.
 */
export function summarise(profile: CpuProfile, bundle: string, isBundle: (url: string) => boolean, intervalUs: number): Summary {
  const starts = bundleModules(bundle);
  const selfUs = new Map<number, number>();
  if (profile.samples?.length) for (const id of profile.samples) selfUs.set(id, (selfUs.get(id) ?? 0) + intervalUs);
  else for (const node of profile.nodes) selfUs.set(node.id, (node.hitCount ?? 0) * intervalUs);
  const parts = new Map<string, number>();
  const functions = new Map<string, { name: string; module: string; ms: number }>();
  let totalUs = 0;
  let idleUs = 0;
  for (const node of profile.nodes) {
    const us = selfUs.get(node.id) ?? 0;
    if (us === 0) continue;
    totalUs += us;
    const { functionName, url, lineNumber } = node.callFrame;
    let part = PSEUDO[functionName];
    let module = "";
    if (part === "idle") idleUs += us;
    if (!part) {
      module = isBundle(url) ? moduleAt(starts, lineNumber) : url || "(built-in)";
      part = isBundle(url) ? (PARTS.find(([, pattern]) => pattern.test(module))?.[0] ?? "other bundle code") : "runtime built-ins (JSON, strings, regexps, …)";
    }
    parts.set(part, (parts.get(part) ?? 0) + us);
    const key = `${functionName || "(anonymous)"}\u0000${module}`;
    const entry = functions.get(key) ?? { name: functionName || "(anonymous)", module, ms: 0 };
    entry.ms += us / 1000;
    functions.set(key, entry);
  }
  return {
    totalMs: totalUs / 1000,
    idleMs: idleUs / 1000,
    parts: [...parts].map(([part, us]) => ({ part, ms: us / 1000 })).sort((a, b) => b.ms - a.ms),
    functions: [...functions.values()].sort((a, b) => b.ms - a.ms),
  };
}

/**
 * The time of the samples taken while `functionName` (of the bundle) was on
 * the stack, ms: its inclusive time, the built-ins and the garbage
 * collection it set off while it ran included (the tables above count self
 * time only). V8 keeps inlined functions as frames of their own.
 */
export function inclusiveMs(profile: CpuProfile, functionName: string, isBundle: (url: string) => boolean, intervalUs: number): number {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const within = new Map<number, boolean>();
  const isWithin = (id: number): boolean => {
    const known = within.get(id);
    if (known !== undefined) return known;
    const frame = byId.get(id)?.callFrame;
    const up = parent.get(id);
    const answer = (!!frame && frame.functionName === functionName && isBundle(frame.url)) || (up !== undefined && isWithin(up));
    within.set(id, answer);
    return answer;
  };
  let us = 0;
  if (profile.samples?.length) for (const id of profile.samples) us += isWithin(id) ? intervalUs : 0;
  else for (const node of profile.nodes) us += isWithin(node.id) ? (node.hitCount ?? 0) * intervalUs : 0;
  return us / 1000;
}

/** Markdown tables: parts of the request path, then the top functions, as shares of busy (non-idle) time. */
export function summaryTables(summary: Summary, top = 25): string {
  const busy = Math.max(1e-9, summary.totalMs - summary.idleMs);
  const pct = (ms: number) => `${((100 * ms) / busy).toFixed(1)}%`;
  return [
    `${Math.round(summary.totalMs)} ms sampled (samples × interval), of which ${Math.round(busy)} ms busy; shares below are of busy time.`,
    "",
    "| part of the path | self time | share |",
    "| --- | ---: | ---: |",
    ...summary.parts.filter((p) => p.part !== "idle").map((p) => `| ${p.part} | ${Math.round(p.ms)} ms | ${pct(p.ms)} |`),
    "",
    "| function | module | self time | share |",
    "| --- | --- | ---: | ---: |",
    ...summary.functions
      .filter((f) => !(f.name in PSEUDO))
      .slice(0, top)
      .map((f) => `| \`${f.name}\` | ${f.module || "—"} | ${Math.round(f.ms)} ms | ${pct(f.ms)} |`),
  ].join("\n");
}
