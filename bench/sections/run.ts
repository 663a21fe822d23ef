// `npm run bench:sections [-- --late 0,700,1500] [--pages N] [--concurrency N] [--results-suffix S]`:
// what a visitor of a cold product page waits for while its non-core
// sections (reviews, recommendations) answer late (issue 67).
//
// The deployed bundle in workerd (bench/stack.ts), the demo origin (100,000
// products, 30 ± 10 ms) and Redis behind the gateway, one isolate. Per
// lateness, the reviews and recommendations services answer that much later
// (the demo origin's faults), and products nobody has asked for are
// requested, a few at once, each read as it arrives: the time to its first
// byte, to its price (templates/partials/price.tsx), and to its end, and
// which sections it showed by default. Lateness 0 is the reference: the time
// the core parts (product, inventory) take when nothing is late.
//
// Not wrk: wrk cannot time a byte inside a body. The pages are few and slow
// (a page waits hundreds of milliseconds for its origin), so this Node client
// is not what limits them. Cached pages' req/s and CPU are bench:profile's and
// bench:ab's. Writes bench/results/sections.md and .json. Measures; asserts nothing.
import { parseCommandLine } from "../../dev/cli";
import { benchmarkRun } from "../lib/cleanup";
import { resultsSuffix, wholeNumber, wholeNumbers } from "../lib/flagValues";
import { describeMachine, runLine, writeResults } from "../lib/report";
import { startStack, startWorkers, toolVersions, type WorkerLogs } from "../stack";
import { RESOURCES } from "../../src/origin/resources";

const CATALOG = 100_000;
const ORIGIN = { latencyMs: 30, jitterMs: 10 };
/** The late services: the page's non-core sections. */
const LATE = ["reviews", "recommendations"] as const;
/** The first product asked for; each lateness takes the next `pages` ids, so every page is cold. */
const FIRST_ID = 50_000;
/** A page that has not ended by then is counted as failed (the longest a page read may take is well below it). */
const PAGE_TIMEOUT_MS = 10_000;

const COMMAND = "npm run bench:sections";
const USAGE = `${COMMAND}: cold product pages while reviews and recommendations answer late (bench/sections/README.md).
The deployed bundle in workerd, the demo origin (${CATALOG.toLocaleString("en-US")} products, ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms) and Redis behind the gateway, one isolate.
Per lateness, products nobody asked for yet are requested a few at once and read as they arrive: time to the first byte,
to the price and to the end (p50/p99), and the share of pages showing a section's default content.
Writes bench/results/sections.md and .json (sections-S.* with --results-suffix S). Needs redis-server.

usage: ${COMMAND} -- [options]
  --late LIST           how late the two services answer, ms, comma-separated (default 0,700,1500; 0 is the reference)
  --pages N             cold pages per lateness, 1 or more (default 60)
  --concurrency N       pages asked for at once, 1 or more (default 4)
  --results-suffix S    write sections-S.* instead
  -h, --help            this text

example: ${COMMAND} -- --late 0,700 --pages 20`;

const { values: args } = parseCommandLine(COMMAND, USAGE, {
  options: {
    late: { type: "string", default: "0,700,1500" },
    pages: { type: "string", default: "60" },
    concurrency: { type: "string", default: "4" },
    "results-suffix": { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});
const lateness = wholeNumbers(COMMAND, "--late", args.late, 0, 5000);
const pages = wholeNumber(COMMAND, "--pages", args.pages, 1);
const concurrency = wholeNumber(COMMAND, "--concurrency", args.concurrency, 1);
const suffix = resultsSuffix(COMMAND, args["results-suffix"]);

const { onCleanup, run } = benchmarkRun("sections");

/** One page as it arrived, ms from its request. */
interface PageTimes {
  status: number;
  firstByteMs: number;
  /** When the price had arrived; null: it never did (an error page). */
  priceMs: number | null;
  endMs: number;
  /** The sections it showed by default (their service late past its budget, or failed). */
  defaulted: string[];
  /** Whether its body came in more than one piece spread over time: streamed. */
  streamed: boolean;
}

/** The demo origin gives every product recommendations but every seventh (dev/origin/catalog.ts, recommendationsFor): those are left out, so that a page without the section is one that defaulted. */
const hasRecommendations = (index: number) => index % 7 !== 0;

/** Whether a page's body shows a section's default rather than its data (templates/partials/reviews.tsx, recommendations.tsx). */
function defaultedSections(body: string): string[] {
  const out: string[] = [];
  if (body.includes("Reviews are unavailable right now.")) out.push("reviews");
  // Without its data the recommendations section is left out (the products asked for all have some: hasRecommendations).
  if (!body.includes('class="recommendations"')) out.push("recommendations");
  return out;
}

/** Requests `url` and reads its body as it comes. */
async function timePage(url: string): Promise<PageTimes> {
  const startedAt = performance.now();
  const since = () => performance.now() - startedAt;
  const response = await fetch(url, { signal: AbortSignal.timeout(PAGE_TIMEOUT_MS), headers: { accept: "text/html" } });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let body = "";
  let firstByteMs: number | null = null;
  let priceMs: number | null = null;
  let lastPieceMs = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    lastPieceMs = since();
    firstByteMs ??= lastPieceMs;
    body += decoder.decode(value, { stream: true });
    if (priceMs === null && body.includes('class="price"')) priceMs = lastPieceMs;
  }
  const endMs = since();
  const ok = response.status === 200;
  return {
    status: response.status,
    firstByteMs: firstByteMs ?? endMs,
    priceMs: ok ? priceMs : null,
    endMs,
    defaulted: ok ? defaultedSections(body) : [],
    // A piece more than 50 ms after the first: not one body cut by the network.
    streamed: firstByteMs !== null && lastPieceMs - firstByteMs > 50,
  };
}

/** `urls`, `concurrency` at a time. */
async function timePages(urls: string[]): Promise<PageTimes[]> {
  const results: PageTimes[] = [];
  let next = 0;
  const lane = async () => {
    while (next < urls.length) {
      const url = urls[next++]!;
      results.push(
        await timePage(url).catch(() => ({ status: 0, firstByteMs: PAGE_TIMEOUT_MS, priceMs: null, endMs: PAGE_TIMEOUT_MS, defaulted: [], streamed: false })),
      );
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return results;
}

function percentile(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

const ms = (value: number | null) => (value === null ? "–" : String(Math.round(value)));
const both = (values: number[]) => `${ms(percentile(values, 50))} / ${ms(percentile(values, 99))}`;
const share = (n: number, of: number) => (of === 0 ? "–" : `${((100 * n) / of).toFixed(0)}%`);

interface Row {
  lateMs: number;
  pages: PageTimes[];
}

function rowLine({ lateMs, pages: answered }: Row, reference: number | null): string {
  const ok = answered.filter((page) => page.status === 200);
  const prices = ok.flatMap((page) => (page.priceMs === null ? [] : [page.priceMs]));
  const priceP50 = percentile(prices, 50);
  const afterCore = priceP50 !== null && reference !== null ? ms(priceP50 - reference) : "–";
  const defaulted = (section: string) => ok.filter((page) => page.defaulted.includes(section)).length;
  const byStatus = new Map<string, number>();
  for (const page of answered) byStatus.set(String(page.status || "failed"), (byStatus.get(String(page.status || "failed")) ?? 0) + 1);
  const statuses = [...byStatus].map(([status, n]) => `${status}: ${n}`).join(", ");
  const streamed = ok.filter((page) => page.streamed).length;
  return `| ${lateMs} | ${statuses} | ${both(ok.map((page) => page.firstByteMs))} | ${both(prices)} | ${afterCore} | ${both(ok.map((page) => page.endMs))} | ${share(ok.filter((page) => page.defaulted.length > 0).length, ok.length)} (${LATE.map((s) => `${s} ${defaulted(s)}`).join(", ")}) | ${share(streamed, ok.length)} |`;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const logs: WorkerLogs = { count: 0, distinct: new Map(), scenario: "sections" };
  console.log(
    `sections: lateness ${lateness.join(", ")} ms; ${pages} cold pages each, ${concurrency} at once; origin ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms`,
  );
  const { servers, filter } = await startStack({ catalogSize: CATALOG, ...ORIGIN }, onCleanup);
  const { workers } = await startWorkers(1, servers.bindings, logs, onCleanup, false);
  const target = workers[0]!.url;

  const rows: Row[] = [];
  let id = FIRST_ID;
  for (const lateMs of lateness) {
    await Promise.all(LATE.map((service) => servers.origin.setFaults({ service, latencyMs: lateMs })));
    const urls: string[] = [];
    for (; urls.length < pages; id++) if (hasRecommendations(id)) urls.push(`${target}/products/p-${String(id).padStart(6, "0")}`);
    const answered = await timePages(urls);
    rows.push({ lateMs, pages: answered });
    const prices = answered.flatMap((page) => (page.priceMs === null ? [] : [page.priceMs]));
    console.log(
      `  ${lateMs} ms late: price p50 ${ms(percentile(prices, 50))} ms, end p50 ${ms(
        percentile(
          answered.map((p) => p.endMs),
          50,
        ),
      )} ms`,
    );
  }
  await Promise.all(LATE.map((service) => servers.origin.setFaults({ service, latencyMs: 0 })));

  const referenceRow = rows.find((row) => row.lateMs === 0);
  const reference = referenceRow
    ? percentile(
        referenceRow.pages.flatMap((page) => (page.priceMs === null ? [] : [page.priceMs])),
        50,
      )
    : null;
  const machine = describeMachine(toolVersions());
  const budgets = LATE.map((service) => `${service} ${RESOURCES[service].defaults.originTimeoutMs} ms`).join(", ");
  const markdown = [
    `# Cold product pages while reviews and recommendations answer late`,
    "",
    runLine(COMMAND, machine, startedAt),
    "",
    `One isolate; origin ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms for every service, the two late ones that much later; ${pages} products nobody had asked for per row, ${concurrency} at once; known-ids filter ${filter.built ? "built" : "NOT built"}. The sections' budgets (their origin time-outs): ${budgets}. Times in ms from the request, p50 / p99 over the 200s; "price after the core" is the price's p50 less the reference row's (nothing late: the core parts' time). A page shows a default when its reviews say they are unavailable or its recommendations are left out; "streamed" when its body came in pieces more than 50 ms apart.`,
    "",
    "| late, ms | answers | first byte p50 / p99 | price p50 / p99 | price after the core, p50 | end p50 / p99 | pages with a default section | streamed |",
    "| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ...rows.map((row) => rowLine(row, reference)),
    "",
    `Worker log lines: ${logs.count}.`,
  ].join("\n");
  const json = { startedAt, machine, origin: ORIGIN, pages, concurrency, rows };
  const files = writeResults(suffix ? `sections-${suffix}` : "sections", { ".md": markdown, ".json": `${JSON.stringify(json, null, 2)}\n` });
  console.log(`\n${markdown}\n\nresults: ${files.join(", ")}`);
}

run(main);
