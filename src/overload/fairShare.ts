// Cold work shared among clients (./client.ts names them): while the isolate
// is under pressure (it runs late, or cold pages wait for a slot), a client
// that holds over twice as many cold pages as the other clients holding some
// do on average (two at least) gets no more: its next cold page is refused at once (a 429 with Retry-After; its cached pages
// are served as ever), so that one client's flood or crawl takes a share of
// the cold work and leaves the rest to the others. That is max-min fairness,
// the per-address `limit_req` of Nginx for the expensive requests only, with
// no rate to tune: the share is whatever the others leave. With one client
// (or none named: off the platform every request is "unknown") nothing
// changes.
//
// A client's pages in progress are leases (shared/leases.ts): given back when
// the page's work ends, reclaimed at their deadline if its request vanished.
import type { Clock } from "../shared/clock";
import { createLeaseTable, type LeaseTable } from "../shared/leases";

/** Cold pages in progress below which a client is never refused: a visitor's page and the next one. */
const ALWAYS_PAGES = 2;
/** A client holding over this many times the other clients' mean holding is over its share. */
const SHARE_FACTOR = 2;

export interface FairShare {
  /** Whether `client` holds over SHARE_FACTOR times what the other clients holding cold work hold on average, and at least ALWAYS_PAGES. */
  overShare(client: string): boolean;
  /** A cold page of `client` is in admission's hands: held until the returned release, or until `leaseMs` have passed. */
  start(client: string, leaseMs: number): () => void;
  /** A page of `client` waits for a slot, until the returned release or `leaseMs`. */
  wait(client: string, leaseMs: number): () => void;
  /** Whether a page of another client than `client` waits for a slot. */
  othersWait(client: string): boolean;
  /** Clients with cold pages in admission's hands now. */
  clients(): number;
}

/** Leases per client; a client's entry goes when it holds none (so at most one per lease held). */
function perClient(clock: Clock) {
  const held = new Map<string, LeaseTable<number, true>>();
  let tickets = 0;
  const count = (client: string) => {
    const table = held.get(client);
    const size = table?.size() ?? 0;
    if (table && size === 0) held.delete(client);
    return size;
  };
  return {
    count,
    clients: () => [...held.keys()],
    take(client: string, leaseMs: number): () => void {
      let table = held.get(client);
      if (!table) held.set(client, (table = createLeaseTable<number, true>({ clock })));
      const ticket = ++tickets;
      table.take(ticket, clock.now() + leaseMs, true);
      return () => {
        table.release(ticket, true);
        count(client);
      };
    },
  };
}

export function createFairShare(clock: Clock): FairShare {
  const inHand = perClient(clock);
  const waiting = perClient(clock);

  return {
    overShare(client) {
      const mine = inHand.count(client);
      if (mine < ALWAYS_PAGES) return false;
      // Over twice what the other clients holding some hold on average: clients differ in how many pages they open at
      // once (a browser several), a flood or a crawl holds many times what the others do. Over the mean of all (this one
      // among them), clients a little busier than the others were refused half their pages under a Zipf load alone.
      let others = 0;
      let clients = 0;
      for (const other of inHand.clients()) {
        if (other === client) continue;
        const theirs = inHand.count(other);
        if (theirs === 0) continue;
        others += theirs;
        clients++;
      }
      return clients > 0 && mine * clients > SHARE_FACTOR * others;
    },
    start: (client, leaseMs) => inHand.take(client, leaseMs),
    wait: (client, leaseMs) => waiting.take(client, leaseMs),
    othersWait: (client) => waiting.clients().some((other) => other !== client && waiting.count(other) > 0),
    clients: () => inHand.clients().filter((client) => inHand.count(client) > 0).length,
  };
}
