// The load tables of bench:peers' report: saturation (with the cached set and
// the /healthz floor), the fixed offered load, the targets, and origin
// requests per page at the two freshness settings.
import { PAGE_RESOURCES, RESOURCES } from "../../src/origin/resources";
import { cpuMs, find, limited, originPerPage, ownRoles, perPage, perResource, present, targets, type PeersReport } from "./figures";
import { f3, mdTable, method, ms, num, x } from "./format";
import type { Row, ScenarioName } from "./plan";
import { PRODUCT_POLICY } from "./systems";

export function saturation(report: PeersReport): string[] {
  const rows = report.rows;
  const d = report.durations;
  const names = present(report);
  const sat = [...names.map((name) => find(rows, name, "saturation")), ...names.map((name) => find(rows, name, "cached"))].filter((r): r is Row => Boolean(r));
  const nginxSat = find(rows, "nginx", "saturation");
  const nginxCached = find(rows, "nginx", "cached");
  const healthz = find(rows, "tier", "healthz");
  return [
    "## Saturation",
    "",
    `Closed loop, ${report.settings.connections} connections, ${d.saturationS} s, after the walk, the warm-up and the fixed-load phase; "cached set": ${d.cachedS} s of Zipf over the ${num(d.walkRanks)} walked ranks only, every page cached. CPU per page: CPU-seconds of the system's own processes ÷ pages (${method("what is counted", "what-the-report-gives")}).`,
    "",
    mdTable(
      ["system", "req/s", "× nginx", "p50 ms", "p99 ms", "errors", "CPU-ms / page (own)", "workerd CPU-ms / page", "origin req / page", "generator"],
      [
        ...sat.map((r) => {
          const nginx = r.scenario === "cached" ? nginxCached : nginxSat;
          return [
            r.scenario === "cached" ? `${r.system}, cached set` : r.system,
            num(r.load.rps),
            nginx ? x(r.load.rps / nginx.load.rps) : "–",
            ms(r.load.p50Ms),
            ms(r.load.p99Ms),
            num(r.load.errors),
            `${cpuMs(r).toFixed(3)} (${ownRoles(r).join(" + ")})`,
            cpuMs(r, "workerd").toFixed(3),
            f3(originPerPage(r)),
            limited(report, r.load) ? `⚠ ${limited(report, r.load)}` : "ok",
          ];
        }),
        ...(healthz
          ? [
              [
                "tier /healthz (floor)",
                num(healthz.load.rps),
                nginxSat ? x(healthz.load.rps / nginxSat.load.rps) : "–",
                ms(healthz.load.p50Ms),
                ms(healthz.load.p99Ms),
                num(healthz.load.errors),
                `${cpuMs(healthz).toFixed(3)}`,
                cpuMs(healthz, "workerd").toFixed(3),
                "–",
                limited(report, healthz.load) ? "⚠" : "ok",
              ],
            ]
          : []),
      ],
      1,
    ),
    "",
  ];
}

export function fixedLoad(report: PeersReport): string[] {
  const rows = report.rows;
  const s = report.settings;
  const d = report.durations;
  const fixed = present(report)
    .map((name) => find(rows, name, "fixed"))
    .filter((r): r is Row => Boolean(r));
  const floorFixed = find(rows, "tier", "healthz-fixed");
  const nginxFixed = find(rows, "nginx", "fixed");
  return [
    "## Fixed offered load",
    "",
    `Paced at ${num(s.rate ?? 0)} req/s for ${d.fixedS} s over ${s.pacedConnections} connections, after the walk (the top ${num(d.walkRanks)} Zipf ranks once each) and a ${d.warmUpS}-s warm-up at the same rate: the same requests for every system. "late": sends that found no connection free (0: open-loop throughout); achieved = answers ÷ the schedule's span.`,
    "",
    mdTable(
      ["system", "asked req/s", "achieved req/s", "late (max ms)", "p50 ms", "p99 ms", "max ms", "errors", "p50 × nginx", "p99 × nginx", "origin req / page"],
      [...fixed, ...(floorFixed ? [floorFixed] : [])].map((r) => [
        r === floorFixed ? "tier /healthz (floor)" : r.system,
        num(r.load.askedRate ?? 0),
        num(r.load.rps),
        `${num(r.load.late)} (${r.load.lateMaxMs})`,
        ms(r.load.p50Ms),
        ms(r.load.p99Ms),
        ms(r.load.maxMs),
        num(r.load.errors),
        nginxFixed ? x(r.load.p50Ms / nginxFixed.load.p50Ms) : "–",
        nginxFixed ? x(r.load.p99Ms / nginxFixed.load.p99Ms) : "–",
        r === floorFixed ? "–" : f3(originPerPage(r)),
      ]),
      1,
    ),
    "",
    ...(floorFixed
      ? ["The /healthz row: a static string at the same rate, connections and schedule: the runtime's own latency, beneath which no page can go.", ""]
      : []),
  ];
}

export function targetList(report: PeersReport, latencyChart: string): string[] {
  return [
    "## Targets",
    "",
    ...targets(report).map((l) => `- **${l.pass === null ? (l.text.startsWith("(information") ? "info" : "n/a") : l.pass ? "pass" : "miss"}** — ${l.text}`),
    "",
    `![p99 latency per system and phase](${latencyChart})`,
    "",
  ];
}

export function freshness(report: PeersReport, originChart: string): string[] {
  const rows = report.rows;
  const tierDefaults = PAGE_RESOURCES.map((name) => `${name} ${RESOURCES[name].defaults.ttl} s`).join(", ");
  return [
    "## Origin requests per page, at two freshness settings",
    "",
    `The peers cache the whole page for ${PRODUCT_POLICY.ttlS} s (then serve it stale while refreshing); the tier's defaults keep each resource fresh for its own time (${tierDefaults}); tier-300s is the same tier with every page resource fresh for ${PRODUCT_POLICY.ttlS} s and stale-while-revalidate ${PRODUCT_POLICY.graceS} s; tier-location the defaults with the location tier on (off in the other rows), its two instances sharing one data center's cache. Warm-up and fixed load: identical requests for every system; saturation: more requests for a faster system, so a larger share of hits.`,
    "",
    mdTable(
      ["system", "warm-up", "fixed load", "saturation", `fixed load per 1,000 pages: ${PAGE_RESOURCES.join(" / ")}`],
      present(report).map((name) => {
        const cell = (sc: ScenarioName) => {
          const r = find(rows, name, sc);
          return r ? f3(originPerPage(r)) : "–";
        };
        const f = find(rows, name, "fixed");
        return [name, cell("warm-up"), cell("fixed"), cell("saturation"), f ? perResource(f, (n) => f3(perPage(n, f) * 1000)) : "–"];
      }),
      1,
    ),
    "",
    `![origin requests per 1,000 pages](${originChart})`,
    "",
  ];
}
