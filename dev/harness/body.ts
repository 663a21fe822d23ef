// A request's body read up to a bound, for the harness's small HTTP servers
// (the location server, the fleet recorder): past the bound nothing more is
// kept, and the caller answers 413.
import type { IncomingMessage } from "node:http";

/** The body, or undefined once it passes `max` bytes (the rest is not kept). */
export async function readBodyUpTo(request: IncomingMessage, max: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
