// bench:peers' price change: a hot product's price changes at the origin under
// paced load, each system is told as it can be (PURGE, POST /__purge,
// nothing), and every target is polled until it shows the new price.
import { performance } from "node:perf_hooks";
import { sleep } from "../lib/sleep";
import { measure, row, zipf } from "./measure";
import { SEEDS, type Context, type Durations, type Row, type Staleness } from "./plan";
import { getPage, priceNow, priceOtherThan } from "../lib/page";
import type { System } from "./systems";

const POLL_MS = 50;
/** Every target must show the new price this long before the change counts as complete. */
const CONFIRM_MS = 1000;

export async function priceChange(ctx: Context, system: System, d: Durations, startedAt: number): Promise<{ row: Row; pending?: Promise<void> }> {
  const id = ctx.workload.hotId();
  const before = await getPage(`${system.targets[0]}/products/${id}`);
  const oldPrice = priceNow(before.body);
  const { minor: newMinor, shown: newPrice } = priceOtherThan(oldPrice);
  ctx.phase(`${system.name} · price change: ${id} ${oldPrice} → ${newPrice} under paced load`, d.priceLoadS * 1000);

  const stale: Staleness = {
    id,
    oldPrice,
    newPrice,
    purge: "",
    purgeMs: null,
    seconds: null,
    capS: d.priceCapS,
    oldAnswers: 0,
    polls: 0,
    pollErrors: 0,
    entryAgeS: 0,
    pending: false,
  };
  let poll: Promise<void> | undefined;
  const m = await measure(system, async () => {
    const load = zipf(ctx, system, d.priceLoadS, SEEDS.price, true);
    await sleep(d.priceLeadS * 1000, ctx.signal);
    await system.origin.changePrice(id, newMinor);
    const changedAt = performance.now();
    stale.entryAgeS = Math.round((changedAt - startedAt) / 100) / 10;
    const purgeStarted = performance.now();
    poll = pollUntilNew(ctx, system, stale, changedAt, d.priceCapS * 1000);
    stale.purge = await system.purge(id);
    stale.purgeMs = system.name === "nginx" ? null : Math.round(performance.now() - purgeStarted);
    return load;
  });
  const r = row(system, "price-change", m, { price: stale }, [`${id}: ${oldPrice} → ${newPrice}; after the change: ${stale.purge}`]);
  r.staleness = stale;
  if (stale.seconds === null && !ctx.signal.aborted) {
    // Not yet seen: the poll goes on (without the load) up to the cap, while the next system runs.
    stale.pending = true;
    ctx.note(`${system.name}: the new price is not served yet; polling in the background for up to ${stale.capS} s after the change`);
    return {
      row: r,
      pending: poll!.then(() => {
        stale.pending = false;
        ctx.note(
          stale.seconds === null
            ? `${system.name}: new price not served within ${stale.capS} s`
            : `${system.name}: new price served by every answer ${stale.seconds} s after the change`,
        );
      }),
    };
  }
  await poll;
  return { row: r };
}

/**
 * Polls the product through every target every 50 ms until each target has
 * shown only the new price for CONFIRM_MS, or until `capMs` after the change.
 * `seconds`: from the change to the start of the first request of that final
 * all-new run.
 */
async function pollUntilNew(ctx: Context, system: System, stale: Staleness, changedAt: number, capMs: number): Promise<void> {
  let streakStart: number | null = null;
  while (!ctx.signal.aborted) {
    const tickStart = performance.now();
    if (tickStart - changedAt > capMs) return;
    const answers = await Promise.all(
      system.targets.map(async (target) => {
        try {
          const page = await getPage(`${target}/products/${stale.id}`, 5000);
          return page.status === 200 ? priceNow(page.body) : null;
        } catch {
          return null;
        }
      }),
    );
    stale.polls += answers.length;
    const errors = answers.filter((a) => a === null).length;
    stale.pollErrors += errors;
    const old = answers.filter((a) => a !== null && a !== stale.newPrice).length;
    stale.oldAnswers += old;
    if (old > 0 || errors > 0) streakStart = null;
    else {
      streakStart ??= tickStart;
      if (performance.now() - streakStart >= CONFIRM_MS) {
        stale.seconds = Math.round((streakStart - changedAt) / 10) / 100;
        return;
      }
    }
    const wait = POLL_MS - (performance.now() - tickStart);
    if (wait > 0) await sleep(wait);
  }
}
