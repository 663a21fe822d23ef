// `npm run warm`: read the fleet's hottest products (or a list) through the
// tier's own read path, from Node, so that their entries are fresh in L2
// before visitors ask. Rate-limited: warming never floods the origin.
//
//   npm run warm -- --top 500 --rate 20
//   npm run warm -- --ids ids.txt          (one id per line)
//
// Reads ORIGIN_URL, UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN from
// the environment (flags --origin, --redis-url, --token override them).
import { readFileSync } from "node:fs";
import { parseConfig } from "../src/config";
import { DEFAULTS } from "../src/config/defaults";
import { isValidProductId } from "../src/origin/types";
import { createTier } from "../src/tier";
import { hottestIds, KEPT, REPORTED } from "../src/warming/hotReport";
import { warmOne } from "../src/scheduled";
import { idsListed, WARM_PER_SECOND, WARM_TOP, warmProducts } from "../src/warming/warm";
import { FILLS_AT_ONCE } from "../src/shared/subrequests";
import { parseCommandLine, usageError } from "./cli";

const COMMAND = "npm run warm";

const USAGE = `${COMMAND}: reads the fleet's hottest products (or a list) through the tier's own read path,
so that their entries are fresh in L2 before visitors ask; rate-limited, so that it never floods the origin.
The hot list is what the isolates report to Redis: each its ${REPORTED} most requested products a minute,
their scores halved each minute (at most ${KEPT.toLocaleString("en-US")}); nothing before a minute of traffic.

usage: ${COMMAND} -- [--top N | --ids FILE] [options]
  --top N               the N hottest products of the fleet's hot list (default ${WARM_TOP})
  --ids FILE            these ids instead (one per line)
  --rate N              products started per second (default ${WARM_PER_SECOND})
  --concurrency N       at most this many at once (default ${FILLS_AT_ONCE})
  --origin URL          the product services (default: ORIGIN_URL, else the local stack's http://127.0.0.1:8788)
  --redis-url URL       the Upstash REST endpoint (default: UPSTASH_REDIS_REST_URL, else http://127.0.0.1:8789)
  --token TOKEN         its token (default: UPSTASH_REDIS_REST_TOKEN, else dev-gateway-token)
  -h, --help            this text

example: ${COMMAND} -- --top 500 --rate 20`;

const { values } = parseCommandLine(COMMAND, USAGE, {
  options: {
    help: { type: "boolean", short: "h" },
    origin: { type: "string" },
    "redis-url": { type: "string" },
    token: { type: "string" },
    top: { type: "string" },
    ids: { type: "string" },
    rate: { type: "string" },
    concurrency: { type: "string" },
  },
});
if (values.top !== undefined && values.ids !== undefined) usageError(COMMAND, "give --top or --ids, not both");
const top = wholeNumber("--top", values.top, WARM_TOP);
const perSecond = positiveNumber("--rate", values.rate, WARM_PER_SECOND);
const concurrency = wholeNumber("--concurrency", values.concurrency, FILLS_AT_ONCE);

function wholeNumber(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) usageError(COMMAND, `${flag} must be a whole number from 1, got ${JSON.stringify(text)}`);
  return value;
}

function positiveNumber(flag: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) usageError(COMMAND, `${flag} must be a number above 0, got ${JSON.stringify(text)}`);
  return value;
}

/**
 * Why `--top` got fewer products than it asked for: the hot list holds only
 * what the isolates reported (each its top REPORTED a minute, halved each
 * minute, at most KEPT), not a cap of this tool.
 */
function shortOfTop(asked: number, found: number): string {
  const why =
    asked > KEPT
      ? `it keeps at most ${KEPT.toLocaleString("en-US")}`
      : `each isolate reports its ${REPORTED} most requested products a minute, halved each minute`;
  return `warm: asked for ${asked}, the fleet's hot list holds ${found} (${why}): warming ${found}`;
}

async function main(): Promise<number> {
  const config = parseConfig({
    ORIGIN_URL: values.origin ?? process.env.ORIGIN_URL ?? "http://127.0.0.1:8788",
    // Required by the configuration; warming renders no page, so any address does.
    PUBLIC_URL: process.env.PUBLIC_URL || "http://localhost:8787",
    UPSTASH_REDIS_REST_URL: values["redis-url"] ?? process.env.UPSTASH_REDIS_REST_URL ?? "http://127.0.0.1:8789",
    UPSTASH_REDIS_REST_TOKEN: values.token ?? process.env.UPSTASH_REDIS_REST_TOKEN ?? "dev-gateway-token",
    KNOWN_IDS: "off",
    // Nobody waits for warming: Redis's calls get the background budget, not a page's 100 ms (a first call to a
    // busy or distant Redis took longer, and warm said that Redis did not answer).
    L2_TIMEOUT_MS: String(DEFAULTS.backgroundCallMs),
  });
  const tier = createTier(config);
  // Redis first: an address that does not answer is said so, not taken for an empty hot list.
  if ((await tier.cache.l2!.run((redis) => redis.ping())) === undefined) {
    console.error(`warm: Redis at ${config.l2!.shards[0]!.url} does not answer (give --redis-url and --token, or UPSTASH_REDIS_REST_URL and _TOKEN)`);
    return 2;
  }
  const ids = values.ids ? idsListed(readFileSync(values.ids, "utf8")) : await hottestIds(tier.cache.l2!, config.keyPrefix, top);
  const invalid = ids.filter((id) => !isValidProductId(id));
  if (invalid.length > 0) {
    console.error(`warm: not valid product ids: ${invalid.slice(0, 5).join(", ")}${invalid.length > 5 ? " …" : ""}`);
    return 2;
  }
  if (ids.length === 0) {
    console.log("warm: nothing to warm (no hot products reported yet; give --ids FILE)");
    return 0;
  }
  if (!values.ids && ids.length < top) console.log(shortOfTop(top, ids.length));
  const writes: Promise<unknown>[] = [];
  console.log(`warming ${ids.length} products at ${perSecond}/s, ${concurrency} at a time`);
  const result = await warmProducts({
    ids,
    perSecond,
    concurrency,
    warmOne: (id) => warmOne(tier, id, (work) => void writes.push(work)),
    onProgress: (done, total, failed) => process.stdout.write(`\r  ${done}/${total} products${failed ? `, ${failed} failed` : ""}   `),
  });
  await Promise.allSettled(writes);
  process.stdout.write("\n");
  console.log(`warmed ${result.warmed}, failed ${result.failed}, in ${(result.ms / 1000).toFixed(1)} s`);
  return result.failed > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`warm: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  },
);
