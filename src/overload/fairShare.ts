// Cold work shared among clients (./client.ts names them): max-min fair
// queueing. A page waiting for a place among the cold pages goes before the
// waiting pages of clients that hold more cold pages than its own does
// (shared/limiter.ts's rank), so that a flood or a crawl waits behind
// everybody else's pages. With one client (off the platform every request
// is "unknown") the order is the queue's own, oldest first. How many times
// its share of the queue a client holds tells admission whether its next
// page is refused, and whether a page of its that is shed is its own excess
// (a 429). A client's pages are leases (shared/leases.ts): given back when
// the page leaves admission's hands, reclaimed at their deadline if its
// request vanished.
import type { Clock } from "../shared/clock";
import { createLeaseTable, type LeaseTable } from "../shared/leases";
import { TARGET_MS } from "./limit";

export interface FairShare {
  /** Cold pages of `client` in admission's hands now (held, waiting or in progress). */
  holding(client: string): number;
  /** A cold page of `client` enters admission's hands: until the returned release, or `leaseMs` at most. */
  start(client: string, leaseMs: number): () => void;
  /** Clients with cold pages in admission's hands now. */
  clients(): number;
  /** How many times its fair share of `places` (shared equally among the clients holding pages) `client` holds: 2 is twice its share. */
  timesShare(client: string, places: number): number;
}

export function createFairShare(clock: Clock): FairShare {
  /** Per client, its pages; a client's entry goes when it holds none (so at most one entry per page held). */
  const held = new Map<string, LeaseTable<number, true>>();
  let tickets = 0;
  const holding = (client: string) => {
    const table = held.get(client);
    const size = table?.size() ?? 0;
    if (table && size === 0) held.delete(client);
    return size;
  };
  let counted = { at: Number.NEGATIVE_INFINITY, clients: 0 };
  /**
   * Clients holding pages, counted again at most once per CoDel target
   * (./limit.ts): the count walks every client (to reclaim their lapsed
   * pages), and admission asks for it at every look of every waiting page;
   * a share judged by a count as fresh as the lag the limit reacts to is as
   * good a share.
   */
  function clients(): number {
    const now = clock.now();
    if (now - counted.at < TARGET_MS) return counted.clients;
    let count = 0;
    for (const client of held.keys()) if (holding(client) > 0) count++;
    counted = { at: now, clients: count };
    return count;
  }
  return {
    holding,
    start(client, leaseMs) {
      let table = held.get(client);
      if (!table) held.set(client, (table = createLeaseTable<number, true>({ clock })));
      const ticket = ++tickets;
      table.take(ticket, clock.now() + leaseMs, true);
      return () => {
        table.release(ticket, true);
        holding(client);
      };
    },
    clients,
    timesShare: (client, places) => (holding(client) * clients()) / places,
  };
}
