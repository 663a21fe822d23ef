// The isolate's fill writes on their way to L2 (issue: Redis commands per
// page). Nobody waits for a write, so it waits a few milliseconds for others
// (sendQueue.ts: one call per shard per window, whichever requests queued
// them), and a lock claim going out meanwhile takes the waiting writes of its
// shard along (WritesToCarry, l2.ts): at hundreds of pages a second an
// isolate claims every few milliseconds, so while claims go out the
// window's own send waits for them (up to writeHoldForClaimMs), and most
// writes cost no call of their own. Plain data only: a write queued by one request is sent by
// another (docs/architecture.md#sharing-work-across-requests-in-one-isolate).
import { DEFAULTS } from "../../config/defaults";
import type { Clock } from "../../shared/clock";
import type { FillWrite, L2, WritesToCarry } from "./l2";
import { createSendQueue, type SendStats } from "./sendQueue";

export interface FillWrites extends WritesToCarry {
  /** Queues `write` with the isolate's other writes; past the queue's bound, it goes on its own, under `background`. */
  send(write: FillWrite, background: (work: Promise<unknown>) => void): void;
  stats(): SendStats;
}

export function createFillWrites(l2: L2, deps: { clock: Clock; sleep: (ms: number) => Promise<void> }): FillWrites {
  const queue = createSendQueue<FillWrite>({
    clock: deps.clock,
    sleep: deps.sleep,
    windowMs: DEFAULTS.sendWindowMs,
    maxPerSend: DEFAULTS.writesPerSend,
    maxQueued: DEFAULTS.sendQueueMax,
    // A write that waited a lock's life is dropped: its lock has lapsed, and another isolate has likely filled the key since.
    maxWaitMs: DEFAULTS.lockTtlMs,
    // Two fills of one key (a refresh, and a fill after a purge) write with their own lock tokens: both go.
    keyOf: (write) => `${write.key} ${write.lockToken}`,
    sizeOf: (write) => write.value.length,
    maxBytesPerSend: DEFAULTS.writeBytesPerSend,
    holdWhileTakenMs: DEFAULTS.writeHoldForClaimMs,
    patient: (write) => write.patient === true,
    patientHoldMs: DEFAULTS.patientWriteHoldMs,
    send: (batch, background) => background(l2.writeFills(batch)),
  });
  return {
    send(write, background) {
      if (!queue.add(write, background)) background(l2.writeFills([write]));
    },
    take: (accepts, maxItems, maxBytes) => queue.take(accepts, maxItems, maxBytes),
    stats: () => queue.stats(),
  };
}
