// Builds the known-ids filter from the origin's listing, with the same code
// the Worker uses (src/knownIds), and switches every isolate to it:
//
//   npm run filter:rebuild -- --origin http://127.0.0.1:8788 \
//     --redis-url http://127.0.0.1:8789 --token dev-gateway-token      (--help)
//
// Flags win over the environment (ORIGIN_URL, UPSTASH_REDIS_REST_URL,
// UPSTASH_REDIS_REST_TOKEN).
// Exit code 0: switched; 1: the build failed (the current filter stays); 2: bad usage.
import { parseCommandLine, usageError } from "./cli";
import { createBreaker } from "../src/shared/breaker";
import { systemClock } from "../src/shared/clock";
import { createL2 } from "../src/cache/l2/l2";
import { DEFAULT_POLICIES, DEFAULTS } from "../src/config/defaults";
import { KNOWN_IDS_DEFAULTS } from "../src/knownIds/limits";
import { KnownIdsRebuildError, listingOf, type RebuildProgress, type RebuildResult } from "../src/knownIds/rebuild";
import { createKnownIds } from "../src/knownIds/store";
import { createOriginClient } from "../src/origin/client";

/** Per Redis call. Longer than the Worker's page budget: a batch of segments is tens of KB, and nobody waits on this. */
const DEFAULT_L2_TIMEOUT_MS = 5000;

const COMMAND = "npm run filter:rebuild";

const USAGE = `${COMMAND}: builds the known-ids filter (the Bloom filter of every product id) from the
origin's GET /products listing into Redis, with the worker's own code, and switches every isolate
to it; the daily cron does the same. The current filter stays in place if the build fails.

usage: ${COMMAND} -- --origin URL --redis-url URL --token TOKEN [options]
  --origin URL         the product services (required; env ORIGIN_URL)
  --redis-url URL      the Upstash REST endpoint (required; env UPSTASH_REDIS_REST_URL)
  --token TOKEN        its token (required; env UPSTASH_REDIS_REST_TOKEN)
  --prefix PREFIX      the tier's Redis key prefix (default ${DEFAULTS.keyPrefix})
  --room N             ids the filter holds beyond the catalog it lists (default ${KNOWN_IDS_DEFAULTS.room}, the worker's)
  --fp-rate P          its false-positive rate (default ${KNOWN_IDS_DEFAULTS.fpRate}, the worker's)
  --timeout-ms MS      budget of each Redis call (default ${DEFAULT_L2_TIMEOUT_MS})
  -h, --help           this text
Exit code 0: switched; 1: the build failed; 2: bad usage.

example (the local stack of npm run dev):
  ${COMMAND} -- --origin http://127.0.0.1:8788 --redis-url http://127.0.0.1:8789 --token dev-gateway-token`;

interface Options {
  origin: string;
  redisUrl: string;
  token: string;
  prefix: string;
  room: number;
  fpRate: number;
  timeoutMs: number;
}

function required(name: string, value: string | undefined): string {
  if (!value) usageError(COMMAND, `${name} is required`);
  return value.replace(/\/+$/, "");
}

function numberOption(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === "") return fallback;
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0) usageError(COMMAND, `${name} must be a positive number, got ${JSON.stringify(value)}`);
  return parsed;
}

function readOptions(): Options {
  const { values } = parseCommandLine(COMMAND, USAGE, {
    options: {
      origin: { type: "string" },
      "redis-url": { type: "string" },
      token: { type: "string" },
      prefix: { type: "string" },
      room: { type: "string" },
      "fp-rate": { type: "string" },
      "timeout-ms": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const env = process.env;
  return {
    origin: required("--origin (or ORIGIN_URL)", values.origin ?? env.ORIGIN_URL),
    redisUrl: required("--redis-url (or UPSTASH_REDIS_REST_URL)", values["redis-url"] ?? env.UPSTASH_REDIS_REST_URL),
    token: required("--token (or UPSTASH_REDIS_REST_TOKEN)", values.token ?? env.UPSTASH_REDIS_REST_TOKEN),
    prefix: values.prefix ?? DEFAULTS.keyPrefix,
    room: numberOption("--room", values.room, KNOWN_IDS_DEFAULTS.room),
    fpRate: numberOption("--fp-rate", values["fp-rate"], KNOWN_IDS_DEFAULTS.fpRate),
    timeoutMs: numberOption("--timeout-ms", values["timeout-ms"], DEFAULT_L2_TIMEOUT_MS),
  };
}

/** One line per page on a terminal (rewritten in place), one per 10 pages otherwise. */
function progressPrinter(): { print(progress: RebuildProgress): void; end(): void } {
  const tty = process.stderr.isTTY;
  let printed = false;
  return {
    print({ pass, ids, pages, ms }) {
      if (!tty && pages % 10 !== 0) return;
      const rate = ms > 0 ? Math.round((ids / ms) * 1000) : 0;
      const line = `pass ${pass}: ${ids.toLocaleString("en-US")} ids listed, ${pages} pages, ${rate.toLocaleString("en-US")} ids/s`;
      process.stderr.write(tty ? `\r${line}\x1b[K` : `${line}\n`);
      printed = true;
    },
    end() {
      if (tty && printed) process.stderr.write("\n");
    },
  };
}

function summary(result: RebuildResult): string {
  const kib = (result.bytes / 1024).toFixed(1);
  const lines = [
    `switched to version ${result.version}`,
    `  ids       ${result.count.toLocaleString("en-US")} (${result.mergedAdds} added during the build), ${result.pages} pages, ${result.passes} pass(es)`,
    `  sized for ${result.capacity.toLocaleString("en-US")} ids at p=${result.fpRate}`,
    `  bits      ${result.m.toLocaleString("en-US")} (k=${result.k}), ${result.segments} segments, ${result.bytes.toLocaleString("en-US")} bytes (${kib} KiB)`,
    `  took      ${(result.ms / 1000).toFixed(2)} s`,
  ];
  if (result.overCapacity) {
    lines.push(`  WARNING   the catalog is larger than the largest allowed filter: its false-positive rate is above ${result.fpRate} (never a false negative)`);
  }
  return lines.join("\n");
}

async function main(): Promise<number> {
  const options = readOptions();
  const coolDownMs = 1000;
  const breaker = createBreaker({ failureThreshold: 3, coolDownMs, clock: systemClock });
  const l2 = createL2({ url: options.redisUrl, token: options.token, timeoutMs: options.timeoutMs, breaker });
  const origin = createOriginClient({ baseUrl: options.origin, policies: DEFAULT_POLICIES });
  // The summary says what happened; the per-isolate state log has nothing to add here.
  const knownIds = createKnownIds({
    l2,
    keyPrefix: options.prefix,
    clock: systemClock,
    room: options.room,
    fpRate: options.fpRate,
    retryMs: coolDownMs,
    log: () => {},
  });
  const progress = progressPrinter();
  try {
    const result = await knownIds.rebuild(listingOf(origin), progress.print);
    progress.end();
    console.log(summary(result));
    return 0;
  } catch (error) {
    progress.end();
    const reason = error instanceof KnownIdsRebuildError ? `${error.message} [${error.failure}]` : String(error);
    console.error(`filter-rebuild failed, the current filter stays in place: ${reason}`);
    return 1;
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`filter-rebuild: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  },
);
