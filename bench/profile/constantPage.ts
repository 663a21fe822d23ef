// The floor of a cached page, beside the floor of any request: the tier's own
// product page, its bytes and headers read off a running instance, returned
// as a constant by a worker of nothing else (no routing, no cache read, no
// middleware). What the runtime charges for a page of that size and those
// headers; what the tier's read path adds comes on top (docs/performance.md,
// "Where the CPU goes").
import { Miniflare } from "miniflare";
import { compatibilityDate, compatibilityFlags } from "../../dev/compatibility";
import { workerdPids } from "../lib/cpu";

/** Headers the runtime sets itself on every answer: not part of the constant. */
const RUNTIME_HEADERS = new Set(["content-length", "transfer-encoding", "connection", "date", "keep-alive", "content-encoding"]);

export interface ConstantPage {
  /** One per instance: each its own workerd process, as the tier's instances are. */
  urls: string[];
  /** Their workerd processes (the tier's are apart). */
  pids: number[];
  /** The page's size in bytes and how many headers it carries. */
  bytes: number;
  headers: number;
  close(): Promise<void>;
}

/** Starts `instances` constant workers for the page at `pageUrl` (asked once, uncompressed, as wrk asks). */
export async function startConstantPage(pageUrl: string, instances: number): Promise<ConstantPage> {
  const answer = await fetch(pageUrl, { headers: { "accept-encoding": "identity" } });
  if (answer.status !== 200) throw new Error(`constant page: ${pageUrl} answered ${answer.status}`);
  const body = await answer.text();
  const headers = [...answer.headers].filter(([name]) => !RUNTIME_HEADERS.has(name.toLowerCase()));
  const script = [
    `const BODY = ${JSON.stringify(body)};`,
    `const HEADERS = ${JSON.stringify(headers)};`,
    "export default { fetch() { return new Response(BODY, { headers: HEADERS }); } };",
  ].join("\n");
  const before = workerdPids();
  const started: Miniflare[] = [];
  const close = async () => void (await Promise.all(started.map((mf) => mf.dispose().catch(() => undefined))));
  try {
    const urls: string[] = [];
    for (let i = 0; i < instances; i++) {
      const mf = new Miniflare({ modules: true, script, compatibilityDate, compatibilityFlags, host: "127.0.0.1", port: 0, cf: false });
      started.push(mf);
      urls.push((await mf.ready).origin);
    }
    return {
      urls,
      pids: [...workerdPids()].filter((pid) => !before.has(pid)),
      bytes: new TextEncoder().encode(body).length,
      headers: headers.length,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
