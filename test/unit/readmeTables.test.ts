// The README's configuration and cache-policy tables are what a shop
// engineer deploys by, and the origin contract's endpoint table what an
// origin team builds by: they are checked here against the parser and the
// registry, so that a changed default, a new setting or a new resource cannot
// leave them behind.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseConfig, type Env } from "../../src/config";
import { DEFAULT_POLICIES, DEFAULTS, ADMIN_LIMITS } from "../../src/config/defaults";
import { PAGE_RESOURCES, RESOURCE_NAMES, RESOURCES } from "../../src/origin/resources";
import { pageRetryAfterSeconds } from "../../src/http/errorPage";
import { ISOLATE_STALL_MS } from "../../src/shared/leases";
import { BACKLOG_MAX_BYTES } from "../../src/cache/l2/l2";
import { REJECTED_ANSWER_TTL } from "../../src/cache/fill/rejections";
import { INTERVAL_MS, TARGET_MS } from "../../src/overload/limit";
import { ONE_BROWSER } from "../../src/overload/fairShare";
import { SYNC_LEASE_MS } from "../../src/invalidation/watcher";

const README = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
const CONTRACT = readFileSync(new URL("../../docs/origin-contract.md", import.meta.url), "utf8");
const base = { ORIGIN_URL: "https://products.internal.example/", PUBLIC_URL: "https://shop.example" };

/** The rows of the markdown table under `heading` (up to the next heading) of `doc`, as trimmed cells. */
function tableUnder(heading: string, doc = README): string[][] {
  const start = doc.indexOf(`\n${heading}\n`);
  expect(start, `the document has a "${heading}" section`).toBeGreaterThanOrEqual(0);
  const section = doc.slice(start + heading.length + 2).split(/\n#{1,3} /)[0]!;
  return section
    .split("\n")
    .filter((line) => line.startsWith("|") && !/^\|\s*-/.test(line))
    .slice(1)
    .map((line) =>
      line
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
}

/** The settings the parser reads: every `Env` field (src/config/index.ts). */
const SETTINGS = [...readFileSync(new URL("../../src/config/index.ts", import.meta.url), "utf8").matchAll(/^ {2}([A-Z][A-Z0-9_]+)\?: /gm)].map((m) => m[1]!);

describe("the README's configuration table", () => {
  const rows = tableUnder("## Configuration").map(([name = "", kind = "", defaultText = ""]) => ({ name: name.replaceAll("`", ""), kind, defaultText }));

  it("names every setting the parser reads, and none it does not", () => {
    // The pattern finds them (the bound is at most 20 settings).
    expect(SETTINGS.length).toBeGreaterThan(10);
    expect(rows.map((row) => row.name).sort()).toEqual([...SETTINGS].sort());
  });

  it("gives each setting's real default: the configuration with the README's value is the one without the setting", () => {
    const checked: string[] = [];
    for (const { name, defaultText } of rows) {
      // A literal default (a number, on/off); "unset: …", "—" and "see below" say what no value means.
      const literal = /^`?(\d[\d.]*|on|off)`?(\s|$)/.exec(defaultText)?.[1];
      if (literal === undefined) continue;
      expect(parseConfig({ ...base, [name]: literal } as Env), `${name} = ${literal}`).toEqual(parseConfig(base));
      checked.push(name);
    }
    // Most have a literal default: the pattern reads them.
    expect(checked.length).toBeGreaterThan(rows.length / 2);
  });
});

describe("the README's cache-policy table", () => {
  const seconds = (text: string) => Number(/^(\d+) s$/.exec(text)?.[1]);

  it("gives every resource's default policy, as the registry does", () => {
    const rows = tableUnder("### Cache policies");
    expect(rows.map(([name = ""]) => name.split(" ")[0])).toEqual([...RESOURCE_NAMES]);
    for (const [name = "", core, ttl = "", swr = "", staleIfError = "", negativeTtl = "", timeout = ""] of rows) {
      const policy = DEFAULT_POLICIES[name.split(" ")[0] as (typeof RESOURCE_NAMES)[number]];
      expect({
        core: core === "yes",
        ttl: seconds(ttl),
        swr: seconds(swr),
        staleIfError: seconds(staleIfError),
        negativeTtl: seconds(negativeTtl),
        originTimeoutMs: Number(/^(\d+) ms$/.exec(timeout)?.[1]),
      }).toEqual(policy);
    }
  });
});

describe("the origin contract's endpoint table", () => {
  it("names every resource of the registry, with each product resource's path and timeout", () => {
    const rows = tableUnder("## Endpoints", CONTRACT);
    expect(rows.map(([name = ""]) => name)).toEqual([...RESOURCE_NAMES]);
    for (const [name = "", request = "", , timeout = ""] of rows) {
      const resource = name as (typeof RESOURCE_NAMES)[number];
      expect(timeout.startsWith(`${DEFAULT_POLICIES[resource].originTimeoutMs} ms`), `${name}'s timeout`).toBe(true);
      if ((PAGE_RESOURCES as readonly string[]).includes(name)) expect(request, `${name}'s request`).toBe(`\`GET ${RESOURCES[resource].path("{id}")}\``);
    }
  });
});

describe("the policy numbers the README gives in its tables and prose", () => {
  const MiB = 1024 * 1024;
  const text = README.replace(/\s+/g, " ");

  it("are config/defaults.ts's: each phrase, made from the number, is in the README", () => {
    const phrases = [
      // The configuration table.
      `1 – ${(2 * DEFAULTS.l1MaxBytes) / MiB} MiB`,
      `lock claims get ${DEFAULTS.l2ClaimTimeoutMs} ms, background writes ${DEFAULTS.backgroundCallMs / 1000} s`,
      `(at most ${DEFAULTS.originMaxConcurrent} callers, one per slot, within the service's timeout)`,
      `| \`COLD_PAGES_MAX\` | var | ${DEFAULTS.coldPagesMax} |`,
      `| \`COLD_PAGE_WAIT_MS\` | var | ${DEFAULTS.coldPageWaitMs} |`,
      // What happens when…
      `halved at most once per ${INTERVAL_MS} ms while the isolate's replies waited more than ${TARGET_MS} ms to be read for a whole ${INTERVAL_MS} ms`,
      `never below one browser's pages: ${ONE_BROWSER})`,
      `a 429 with \`Retry-After\` after ${INTERVAL_MS} ms`,
      // Purging.
      `\`ids\` (≤ ${ADMIN_LIMITS.ids.toLocaleString("en-US")}), \`tags\` (≤ ${ADMIN_LIMITS.tags}`,
      `\`413\` over ${ADMIN_LIMITS.bodyBytes / 1024} KB`,
      // Scaling out.
      `asked for ${DEFAULTS.hotPerMinute} times a minute in an isolate is refreshed during the last ${DEFAULTS.refreshAheadShare * 100}% of its ttl`,
      // What happens when…
      `Blind to purges after ${(DEFAULTS.purgePollMs + SYNC_LEASE_MS) / 1000} s (a poll and a sync's lease without an answer), an isolate refreshes entries older than ${DEFAULTS.softPurgeGraceMs / 1000} s`,
      `after the breaker opens (${DEFAULTS.breakerFailures} failures)`,
      `failures over ${ISOLATE_STALL_MS} ms, then a ${ISOLATE_STALL_MS}-ms probe`,
      `a PING every ${ISOLATE_STALL_MS} ms`,
      `the newest, ≤ ${BACKLOG_MAX_BYTES / MiB} MiB per isolate`,
      `at least ${DEFAULTS.breakerFailures} of its last ${4 * DEFAULTS.breakerFailures} calls failed and they are at least half: no calls for ${DEFAULTS.breakerCoolDownMs / 1000} s`,
      `1 product fetch per such id per isolate per ${REJECTED_ANSWER_TTL} s`,
      `\`Retry-After: ${pageRetryAfterSeconds(DEFAULTS)}\``,
    ];
    expect(phrases.filter((phrase) => !text.includes(phrase))).toEqual([]);
  });
});
