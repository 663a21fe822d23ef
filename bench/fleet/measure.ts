// bench:fleet's readings: what Redis did over a stretch (its own counts of
// commands and bytes, and a MONITOR census that tells the commands the
// gateway sent by what they were for), what the origin was asked, and the
// reach of purges (how long after a purge's 202 each isolate shows the new
// price).
import { setTimeout as sleep } from "node:timers/promises";
import type { OriginAdmin } from "../../dev/harness/originAdmin";
import { type Census, type RedisProbe, usageBetween } from "../../dev/harness/redisProbe";
import { get } from "../lib/probe";
import { priceNow } from "../lib/page";
import { purgeUntilAccepted } from "../chaos/purge";
import { REACH, STORM } from "./plan";

/** What a stretch cost: Redis commands sent (the census: what Upstash bills), by purpose; bytes each way; origin fetches. */
export interface Usage {
  seconds: number;
  commands: number;
  byPurpose: Record<string, number>;
  /** Commands by shape (`evalsha pp:v1:p:<id> (claim)`), the largest first. */
  byShape: Record<string, number>;
  /** Bytes Redis read from its clients and wrote to them (RESP), the census's own stream left out. */
  bytesIn: number;
  bytesOut: number;
  originFetches: number;
}

/** Commands the harness sends on its own connection (dev/harness/redisProbe.ts leaves them out of its counts too). */
const HARNESS = /^(info|monitor|ping|select|config|client)\b/;

/** What a command was for, from its shape (dev/harness/redisProbe.ts's keyShape). */
function purposeOf(shape: string): string {
  // The log's reads (a read-only script) grow with the isolates that read it; a purge's recording is once for the fleet.
  if (shape.includes(":purge:")) return /^eval(sha)?_ro\b/.test(shape) ? "purge log reads" : "purges recorded";
  if (shape.includes(":kid:")) return "known-ids filter";
  if (shape.includes("(claim")) return "fill claims";
  if (shape.includes("(write)")) return "fill writes";
  if (shape.startsWith("mget") || shape.startsWith("get ")) return "L2 reads";
  return "other";
}

/** Runs `during` under the census and Redis's own counts; the usage over it. */
export async function measure(redis: RedisProbe, origin: OriginAdmin, during: () => Promise<unknown>): Promise<Usage> {
  const [before, fetchesBefore] = [await redis.snapshot(), (await origin.counters()).total];
  const census: Census = await redis.census(async () => void (await during()));
  const [after, fetchesAfter] = [await redis.snapshot(), (await origin.counters()).total];
  const usage = usageBetween(before, after);
  // The harness's own readings (INFO, while `windows` runs) are not the tier's.
  const tier = Object.entries(census.sentByKey).filter(([shape]) => !HARNESS.test(shape));
  const byPurpose: Record<string, number> = {};
  for (const [shape, n] of tier) byPurpose[purposeOf(shape)] = (byPurpose[purposeOf(shape)] ?? 0) + n;
  const byShape = Object.fromEntries(tier.sort((a, b) => b[1] - a[1]).slice(0, 12));
  return {
    seconds: census.seconds,
    commands: tier.reduce((sum, [, n]) => sum + n, 0),
    byPurpose,
    byShape,
    bytesIn: usage.netInBytes,
    bytesOut: Math.max(0, usage.netOutBytes - census.bytes),
    originFetches: fetchesAfter - fetchesBefore,
  };
}

/**
 * Redis's command count (INFO commandstats, the harness's own left out)
 * every `everyS` seconds while `during` runs: the commands of each window.
 * Counts every command Redis ran, those inside scripts too: a shape of the
 * curve, not a bill (the census is the bill).
 */
export async function windows(redis: RedisProbe, everyS: number, during: Promise<unknown>): Promise<number[]> {
  const counts: number[] = [];
  let done = false;
  void during.finally(() => void (done = true));
  const total = async () => Object.values((await redis.snapshot()).calls).reduce((sum, n) => sum + n, 0);
  let last = await total();
  while (!done) {
    await Promise.race([sleep(everyS * 1000), during]);
    if (done) break;
    const now = await total();
    counts.push(now - last);
    last = now;
  }
  await during;
  return counts;
}

/** The minor units of a price as a page shows it ("$100.07" → 10007; NaN for none). */
const minorOf = (shown: string | null) => (shown === null ? Number.NaN : Number(shown.replace(/[^\d]/g, "")));

/** One purge's reach: ms from its 202 until each isolate showed the new price (null: not within REACH.giveUpMs). */
interface Reach {
  id: string;
  ms: (number | null)[];
}

/**
 * The purge storm: STORM.purges price changes of `ids` in turn, each at the
 * origin (which tells nobody) and then purged as the shop's backend would
 * (POST /__purge until 202), STORM.perSecond of them. For every
 * REACH.reachEvery-th, every isolate is asked for the page every
 * REACH.pollMs until it shows the new price.
 */
export async function purgeStorm(o: { targets: readonly string[]; token: string; origin: OriginAdmin; ids: readonly string[]; firstPrice: number }) {
  const reaches: Reach[] = [];
  const acks: number[] = [];
  /** Every purge attempt's status (0: no answer): a purge goes again, on the next isolate, until a 202. */
  const attempts: Record<string, number> = {};
  const tasks: Promise<void>[] = [];
  for (let k = 0; k < STORM.purges; k++) {
    const id = o.ids[k % o.ids.length]!;
    const minor = o.firstPrice + k * 7;
    tasks.push(
      (async () => {
        await o.origin.changePrice(id, minor, { notify: false });
        const started = performance.now();
        const inst = await purgeUntilAccepted({
          targets: o.targets,
          token: o.token,
          body: JSON.stringify({ ids: [id] }),
          first: k,
          timeoutMs: 5000,
          stopped: () => false,
          onAttempt: (status) => {
            attempts[status] = (attempts[status] ?? 0) + 1;
          },
        });
        const ackAt = performance.now();
        acks.push(Math.round(ackAt - started));
        if (inst === null || k % REACH.reachEvery !== 0) return;
        const ms = await Promise.all(
          o.targets.map(async (target) => {
            for (;;) {
              const elapsed = performance.now() - ackAt;
              if (elapsed > REACH.giveUpMs) return null;
              const answer = await get(`${target}/products/${id}`, 5000, true);
              if (answer.status === 200 && minorOf(priceNow(answer.body ?? "")) === minor) return Math.round(performance.now() - ackAt);
              await sleep(REACH.pollMs);
            }
          }),
        );
        reaches.push({ id, ms });
      })(),
    );
    await sleep(1000 / STORM.perSecond);
  }
  await Promise.all(tasks);
  return { reaches, acks, attempts };
}
