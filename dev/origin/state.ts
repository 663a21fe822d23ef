// What the admin endpoints (./admin.ts) set and the contract's routes
// (./contract.ts) obey: the base latency, the requests counted per service
// and id, and the faults injected per service. Its services are the tier's
// resources, as the registry (src/origin/resources.ts) lists them.
import type { Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { RESOURCE_NAMES, type ResourceName } from "../../src/origin/resources";
import { isValidProductId } from "../../src/origin/types";
import type { CatalogStore } from "./catalog";

type DownMode = false | "500" | "refuse" | "hang";

interface Fault {
  /** Added to the base latency. */
  latencyMs: number;
  /** Fraction of requests answered 500. */
  errorRate: number;
  down: DownMode;
  /**
   * What ids the service holds nothing for are answered: 404 as the contract
   * says, or 400 to 499, as an origin that validates ids more strictly than
   * the contract would (junk ids answered 400 or 422).
   */
  unknownIdStatus: number;
  /**
   * Ids looked up in lower case and answered with the catalog's spelling: an
   * origin that canonicalises `P-000001` to `p-000001`, so that the answer
   * names another id than the one asked for.
   */
  canonicalIds: boolean;
}

/** The most latency the options and the admin endpoints take: ten minutes. */
export const MAX_LATENCY_MS = 600_000;

const NO_FAULT: Fault = { latencyMs: 0, errorRate: 0, down: false, unknownIdStatus: 404, canonicalIds: false };

export interface Settings {
  port: number;
  host: string;
  catalogSize: number;
  /** Base latency of every service request; changed by POST /__admin/latency. */
  latencyMs: number;
  /** Uniform jitter around latencyMs. */
  jitterMs: number;
  purgeUrl: string | undefined;
  purgeToken: string | undefined;
  knownIdsUrl: string | undefined;
}

/** One running origin's state, shared by its routes. */
export interface OriginState {
  settings: Settings;
  store: CatalogStore;
  counters: Counters;
  faults: Faults;
  /** Aborted when the server closes: ends every pending delay and hang. */
  closing: AbortSignal;
}

/** Sleeps, unless `signal` aborts first. */
export async function delay(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0) return;
  await sleep(ms, undefined, { signal }).catch(() => undefined);
}

// ---------------------------------------------------------------- counters

const MAX_COUNTED_IDS = 100_000;

interface CountersSnapshot {
  total: number;
  services: Record<ResourceName, number>;
  /** Requests per `service:id`, and of those the ones answered with an injected failure per `service:id:failed`. */
  ids: Record<string, number>;
}

export interface Counters {
  count(service: ResourceName, id: string | undefined): void;
  /** A counted request was answered with an injected failure (a 500, a refused or dropped connection). */
  failed(service: ResourceName, id: string | undefined): void;
  reset(): void;
  snapshot(): CountersSnapshot;
}

/** Requests each service received, and per id (bounded: new ids stop being added, totals go on). */
export function createCounters(): Counters {
  let total = 0;
  let services = zeroServices();
  const ids = new Map<string, number>();
  function countId(key: string, id: string | undefined): void {
    // Only well-formed ids become keys, so hostile paths cannot grow the map with junk.
    if (id === undefined || !isValidProductId(id)) return;
    const seen = ids.get(key);
    if (seen !== undefined) ids.set(key, seen + 1);
    else if (ids.size < MAX_COUNTED_IDS) ids.set(key, 1);
  }
  return {
    count(service, id) {
      total++;
      services[service]++;
      countId(`${service}:${id}`, id);
    },
    failed: (service, id) => countId(`${service}:${id}:failed`, id),
    reset() {
      total = 0;
      services = zeroServices();
      ids.clear();
    },
    snapshot: () => ({ total, services: { ...services }, ids: Object.fromEntries(ids) }),
  };
}

function zeroServices(): Record<ResourceName, number> {
  return Object.fromEntries(RESOURCE_NAMES.map((service) => [service, 0])) as Record<ResourceName, number>;
}

// ---------------------------------------------------------------- faults

export interface Faults {
  get(service: ResourceName): Fault;
  set(services: readonly ResourceName[], fault: Fault): void;
  clear(): void;
  /** Resolves at the next change of faults, at wake(), or when `socket` closes. */
  nextChange(socket: Socket): Promise<void>;
  wake(): void;
  snapshot(): Record<ResourceName, Fault>;
}

export function createFaults(): Faults {
  const faults = new Map<ResourceName, Fault>();
  /** Hanging requests, woken whenever the faults change or the server closes. */
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const waiter of [...waiters]) waiter();
  };
  const get = (service: ResourceName) => faults.get(service) ?? NO_FAULT;
  return {
    get,
    set(services, fault) {
      for (const service of services) faults.set(service, fault);
      wake();
    },
    clear() {
      faults.clear();
      wake();
    },
    nextChange: (socket) =>
      new Promise((resolve) => {
        const done = () => {
          waiters.delete(done);
          socket.off("close", done);
          resolve();
        };
        waiters.add(done);
        socket.once("close", done);
      }),
    wake,
    snapshot: () => Object.fromEntries(RESOURCE_NAMES.map((service) => [service, get(service)])) as Record<ResourceName, Fault>,
  };
}
