/**
 * `npm run fleet -- --since 1h`: the fleet's figures, every isolate together
 * (README, "Seeing the fleet"): runs the queries of dev/fleet/queries.ts
 * against Workers Analytics Engine's SQL API and prints them as tables, with a
 * chart per minute of what is better seen than read.
 *
 *   CLOUDFLARE_ACCOUNT_ID, CLOUDFLARE_API_TOKEN (Account Analytics: Read)
 *   --since 15m | 1h | 1d   how far back (default 1h; at most 90 days, what Analytics Engine keeps)
 *   --dataset NAME          the dataset wrangler.toml binds as FLEET (default edge_product_pages)
 *   --local [URL]           the local recorder instead (`DEV_ISOLATES=2 npm run dev` runs one; default http://127.0.0.1:8790)
 *   --json                  the figures as JSON, for scripts
 */
import { parseCommandLine, usageError } from "../cli";
import { FLEET_DATASET } from "../../src/observability/fleetPoints";
import { fleetFigures, type SqlEndpoint } from "./fleetTables";
import { LOCAL_RECORDER_PORT, LOCAL_RECORDER_TOKEN, localSqlUrl } from "./local";
import { printFigures } from "./print";

const MAX_SINCE_SECONDS = 90 * 86_400;
const COMMAND = "npm run fleet";

const USAGE = `${COMMAND}: the fleet's figures, every isolate together (README, "Seeing the fleet"): pages by
outcome, tiers, origin calls, services, locations, isolates, breakers, purges, as tables and charts
per minute, from Workers Analytics Engine's SQL API (or the local recorder of DEV_ISOLATES=2 npm run dev).

usage: ${COMMAND} -- [options]
  --since DURATION   how far back: 15m, 1h, 2d… (default 1h; at most 90 days, what Analytics Engine keeps)
  --dataset NAME     the dataset wrangler.toml binds as FLEET (default ${FLEET_DATASET})
  --local [URL]      the local recorder instead of Cloudflare (default http://127.0.0.1:${LOCAL_RECORDER_PORT})
  --json             the figures as JSON, for scripts
  -h, --help         this text
Without --local: CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_API_TOKEN (a token with Account Analytics: Read).

examples: ${COMMAND} -- --since 15m
          ${COMMAND} -- --local --since 15m`;

function parseSince(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(s|m|min|h|d)$/.exec(text.trim());
  if (!match) usageError(COMMAND, `--since takes a duration such as 15m, 1h or 2d, not ${JSON.stringify(text)}`);
  const seconds = Number(match[1]) * { s: 1, m: 60, min: 60, h: 3600, d: 86_400 }[match[2] as "s" | "m" | "min" | "h" | "d"];
  if (seconds <= 0 || seconds > MAX_SINCE_SECONDS)
    usageError(COMMAND, `--since must be more than 0 and at most 90 days (what Analytics Engine keeps), not ${text}`);
  return seconds;
}

function endpointFrom(local: string | undefined, env: NodeJS.ProcessEnv): SqlEndpoint {
  if (local !== undefined) {
    return { url: localSqlUrl(local === "" ? `http://127.0.0.1:${LOCAL_RECORDER_PORT}` : local), token: LOCAL_RECORDER_TOKEN };
  }
  const account = env.CLOUDFLARE_ACCOUNT_ID;
  const token = env.CLOUDFLARE_API_TOKEN;
  const missing = [
    !account && "CLOUDFLARE_ACCOUNT_ID (the dashboard's account id)",
    !token && "CLOUDFLARE_API_TOKEN (a token with Account Analytics: Read)",
  ].filter(Boolean);
  if (missing.length > 0) throw new Error(`set ${missing.join(" and ")}, or pass --local for the local recorder`);
  if (!/^[0-9a-f]{32}$/.test(account!)) throw new Error(`CLOUDFLARE_ACCOUNT_ID must be the 32 hex digits of the account id, not ${JSON.stringify(account)}`);
  return { url: `https://api.cloudflare.com/client/v4/accounts/${account}/analytics_engine/sql`, token: token! };
}

async function main(): Promise<void> {
  const { values } = parseCommandLine(COMMAND, USAGE, {
    options: {
      since: { type: "string", default: "1h" },
      dataset: { type: "string", default: FLEET_DATASET },
      local: { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    // `--local` alone: the default recorder.
    args: process.argv.slice(2).map((arg, i, all) => (arg === "--local" && (all[i + 1] === undefined || all[i + 1]!.startsWith("--")) ? "--local=" : arg)),
  });
  if (!/^[A-Za-z0-9_]{1,64}$/.test(values.dataset))
    usageError(COMMAND, `--dataset must be a dataset name (letters, digits, _), not ${JSON.stringify(values.dataset)}`);
  const sinceSeconds = parseSince(values.since);
  const endpoint = endpointFrom(values.local, process.env);
  const figures = await fleetFigures(endpoint, { sinceSeconds, dataset: values.dataset }).catch((error: unknown) => {
    // fetch's own words for a refused connection are "fetch failed": say which address and what usually runs there.
    if (error instanceof TypeError && values.local !== undefined) {
      throw new Error(`no recorder answers at ${endpoint.url} (DEV_ISOLATES=2 npm run dev runs one on port ${LOCAL_RECORDER_PORT})`);
    }
    throw error;
  });
  console.log(values.json ? JSON.stringify(figures, null, 2) : printFigures(figures));
}

main().catch((error: unknown) => {
  console.error(`npm run fleet: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
