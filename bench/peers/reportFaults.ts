// The faults of bench:peers' report (the cold herd, the origin slow and down,
// the price change, Redis down), then where the CPU went and the answers that
// were not 2xx/3xx.
import { PAGE_RESOURCES } from "../../src/origin/resources";
import { perResource, stalenessCell, type PeersReport } from "./figures";
import { mdTable, method, ms, num, pct } from "./format";
import { HERD_REQUESTS, SCENARIO_LABELS, type ScenarioName } from "./plan";

const FAULTS: ScenarioName[] = ["herd", "origin-slow", "origin-down", "price-change", "redis-down"];

export function faults(report: PeersReport): string[] {
  const s = report.settings;
  const d = report.durations;
  const faultRows = report.rows.filter((r) => FAULTS.includes(r.scenario));
  if (!faultRows.length) return [];
  const out = [
    "## Faults and the cold herd",
    "",
    `Paced at ${num(s.rate ?? 0)} req/s for ${d.faultS} s (price change: ${d.priceLoadS} s) but the herd (${num(HERD_REQUESTS)} requests at once: a burst, not a rate). After each origin fault: ${d.pauseS} s idle and ${d.recoverS} s of paced load, not measured.`,
    "",
    mdTable(
      [
        "system",
        "scenario",
        "requests",
        "req/s",
        "late",
        "p50 ms",
        "p99 ms",
        "errors (rate)",
        "origin requests",
        PAGE_RESOURCES.join(" / "),
        "new price served after",
      ],
      faultRows.map((r) => [
        r.system,
        SCENARIO_LABELS[r.scenario],
        num(r.load.requests),
        num(r.load.rps),
        r.load.askedRate ? num(r.load.late) : "–",
        ms(r.load.p50Ms),
        ms(r.load.p99Ms),
        `${num(r.load.errors)} (${pct(r.load.errors / Math.max(1, r.load.requests))})`,
        num(r.originTotal),
        perResource(r, num),
        r.staleness ? stalenessCell(r) : "–",
      ]),
      2,
    ),
    "",
  ];
  const priceRows = report.rows.filter((r) => r.staleness);
  if (priceRows.length) {
    out.push(
      mdTable(
        [
          "price change",
          "product",
          "old → new",
          "done right after the change",
          "purge call",
          "new price served after",
          "old-price answers / polls",
          "poll errors",
          "entry age at the change",
        ],
        priceRows.map((r) => {
          const p = r.staleness!;
          return [
            r.system,
            p.id,
            `${p.oldPrice} → ${p.newPrice}`,
            p.purge,
            p.purgeMs === null ? "–" : `${p.purgeMs} ms`,
            stalenessCell(r),
            `${num(p.oldAnswers)} / ${num(p.polls)}`,
            num(p.pollErrors),
            `≤ ${p.entryAgeS} s`,
          ];
        }),
        2,
      ),
      "",
      `The hot product is the Zipf rank-1 product; how each system is told, and the poll: ${method("the price change", "the-price-change-and-nginx")}.`,
      "",
    );
  }
  return out;
}

export function cpuAndErrors(report: PeersReport): string[] {
  const rows = report.rows;
  const out = [
    "## Where the CPU went",
    "",
    `Cores busy (CPU-seconds ÷ wall seconds) during each phase, by process (${method("the columns", "where-the-cpu-went")}; "others": the rest of the machine, a neighbour).`,
    "",
    mdTable(
      ["system", "phase", "workerd", "nginx / varnish", "origin (+gw)", "redis", "wrk", "harness", "other workerd", "others"],
      rows.map((r) => {
        const c = (role: string) => {
          const v = r.cpu.seconds[role];
          return v === undefined ? "–" : (v / Math.max(0.001, r.cpu.wallS)).toFixed(2);
        };
        return [
          r.system,
          SCENARIO_LABELS[r.scenario],
          c("workerd"),
          r.cpu.seconds.nginx !== undefined ? c("nginx") : c("varnish"),
          r.cpu.seconds.origin !== undefined ? c("origin") : c("origin+gateway"),
          c("redis"),
          c("wrk"),
          c("harness"),
          c("other workerd"),
          c("others"),
        ];
      }),
      2,
    ),
    "",
    "## Answers that were not 2xx/3xx",
    "",
  ];
  const bad = rows.filter((r) => r.load.errors > 0);
  if (!bad.length) out.push("None.", "");
  for (const r of bad)
    out.push(
      `- ${r.system} · ${SCENARIO_LABELS[r.scenario]}: ${Object.entries(r.load.errorKinds)
        .map(([k, n]) => `${k} ×${num(n)}`)
        .join(", ")}`,
    );
  if (bad.length) out.push("");
  const notes = rows.flatMap((r) => r.notes.map((n) => `${r.system} · ${SCENARIO_LABELS[r.scenario]}: ${n}`));
  if (notes.length) out.push("Notes:", "", ...notes.map((n) => `- ${n}`), "");
  return out;
}
