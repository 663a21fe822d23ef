// What the tiers cost in bench:peers' report: Redis commands per page (Redis's
// own count, the MONITOR census, the idle cost) and the cost per million page
// views at bench/lib/prices.json's prices.
import { costLine, pricesNote, usd } from "../lib/cost";
import { cost, find, originPerPage, perPage, present, TIERS, type PeersReport } from "./figures";
import { f3, mdTable, method, num, split, sum } from "./format";

export function redisCommands(report: PeersReport): string[] {
  const tiers = TIERS.filter((t) => present(report).includes(t));
  if (!tiers.length) return [];
  const out = ["## Redis commands", ""];
  for (const name of tiers) {
    const r = find(report.rows, name, "saturation");
    const cen = report.census[name];
    if (r?.redis) {
      out.push(
        `- **${name}, saturation run** (Redis's own count, \`INFO commandstats\`: an EVALSHA and each redis.call inside it count once each): ` +
          `**${f3(perPage(r.redis.total, r))} commands per page** (${num(r.redis.total)} for ${num(r.load.requests)} pages): ${split(r.redis.byCommand, r.load.requests)}; ` +
          `bytes per page to Redis ${num(perPage(r.redis.netInBytes, r))}, from Redis ${num(perPage(r.redis.netOutBytes, r))}.`,
      );
    }
    if (cen) {
      const sent = sum(cen.sent);
      const inside = sum(cen.inScripts);
      out.push(
        `- **${name}, census** (${cen.seconds} s of saturation with MONITOR on, not measured otherwise; ${num(cen.pages)} pages): commands **sent by the gateway ${f3(sent / Math.max(1, cen.pages))} per page** (${split(cen.sent, cen.pages)}); ` +
          `run inside scripts ${f3(inside / Math.max(1, cen.pages))} per page (${split(cen.inScripts, cen.pages)}); Redis's count = the two together, ${f3((sent + inside) / Math.max(1, cen.pages))} per page.`,
      );
    }
  }
  const idle = report.idle;
  out.push(
    idle
      ? `- **Idle cost** (the calibration tier, ${idle.instances} isolates up, no traffic for ${idle.seconds} s, from 5 s after its load): ${num(idle.usage.total)} commands = **${num(idle.perIsolateHour)} per isolate-hour**${
          idle.usage.total
            ? ` (${Object.entries(idle.usage.byCommand)
                .map(([k, n]) => `${k} ${n}`)
                .join(", ")})`
            : ""
        }.`
      : "- **Idle cost**: not measured (no calibration tier: --rate was given, or the run stopped).",
    "",
    `How each count is taken: ${method("the method", "what-the-report-gives")}.`,
    "",
  );
  return out;
}

export function costPerMillionPages(report: PeersReport): string[] {
  const names = present(report);
  const tiers = TIERS.filter((t) => names.includes(t));
  if (!tiers.length) return [];
  const out = ["## Cost per million page views", "", pricesNote(report.prices), ""];
  const costs = tiers.flatMap((name) => {
    const k = cost(report, name);
    return k ? [{ name, ...k }] : [];
  });
  if (!costs.length) return out;
  const peers = names
    .filter((p) => !TIERS.includes(p))
    .map((p) => {
      const f = find(report.rows, p, "fixed");
      return f ? `${p} ${num(originPerPage(f) * 1e6)} origin fetches per million pages` : null;
    })
    .filter(Boolean)
    .join(", ");
  out.push(
    mdTable(
      [
        "system",
        "CPU-ms / page",
        "Redis commands / page",
        "Redis KB / page",
        "origin fetches / page",
        "Workers requests",
        "Workers CPU",
        "Redis commands",
        "Redis bandwidth",
        "total",
        "Redis ≤ Workers",
      ],
      costs.map(({ name, c, source }) => {
        const u = c.usage;
        return [
          name,
          f3(u.cpuMs / 1e6),
          `${f3(u.redisCommands / 1e6)} (${source})`,
          f3((u.redisGB * 1e9) / 1e6 / 1000),
          f3(u.originFetches / 1e6),
          usd(c.usd.workersRequests),
          usd(c.usd.workersCpu),
          usd(c.usd.redisCommands),
          usd(c.usd.redisBandwidth),
          `**${usd(c.usd.total)}**`,
          c.usd.redis <= c.usd.workers ? "yes" : "**no**",
        ];
      }),
      1,
    ),
    "",
    `Per page: CPU (workerd's process CPU, an upper bound of what Cloudflare bills) and Redis bytes from the saturation run, commands from the census, origin fetches from the fixed load. The peers at the same load: ${peers || "not run"}.`,
    "",
    ...costs.map(({ name, c }) => `- ${name}: ${costLine(c)}`),
    "",
  );
  return out;
}
