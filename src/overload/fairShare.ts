// Cold work shared among clients: max-min fair queueing (docs/architecture.md#overload).
import type { Clock } from "../shared/clock";
import { createLeaseTable, type LeaseTable } from "../shared/leases";

/** Every request without a client's address (off the platform): all visitors, never one client asking too much. */
export const UNKNOWN_CLIENT = "unknown";
/** One browser's cold pages at once: as many as it asks one host for over HTTP/1.1 (six connections). A client holding fewer
 * is never past its share (after a deploy, hundreds of visitors split the queue about one page each); the limit never falls below it. */
export const ONE_BROWSER = 6;

export function createFairShare(clock: Clock) {
  /** Per client, its pages; a client's entry goes when it holds none. */
  const held = new Map<string, LeaseTable<number, true>>();
  let tickets = 0;
  const holding = (client: string) => {
    const size = held.get(client)?.size() ?? 0;
    if (size === 0) held.delete(client);
    return size;
  };
  // Walks every client: at most the pages in admission's hands, and counted once a page.
  const clients = () => [...held.keys()].filter((client) => holding(client) > 0).length;
  return {
    /** Cold pages of `client` in admission's hands now (held, waiting or in progress). */
    holding,
    /** A cold page of `client` enters admission's hands: until the returned release, or `leaseMs` at most. */
    start(client: string, leaseMs: number) {
      let table = held.get(client);
      if (!table) held.set(client, (table = createLeaseTable<number, true>({ clock })));
      const ticket = ++tickets;
      table.take(ticket, clock.now() + leaseMs, true);
      return () => {
        table.release(ticket, true);
        holding(client);
      };
    },
    /** Clients with cold pages in admission's hands now. */
    clients,
    /** How many times its share of `places` (split equally among the clients holding pages) `client` holds: none for "unknown"
     * (everybody), a client alone (what it meets is the isolate's busyness), or one holding fewer than one browser's pages. */
    timesShare: (client: string, places: number) =>
      client === UNKNOWN_CLIENT || clients() < 2 || holding(client) < ONE_BROWSER ? 0 : (holding(client) * clients()) / places,
  };
}
