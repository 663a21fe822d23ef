// One runtime instance of the worker: its own workerd process, so its own
// isolate with its own L1. Several of them stand for several isolates or
// locations sharing one L2.
import { Miniflare } from "miniflare";
import { join } from "node:path";
import type { Env } from "../../src/config";
import { BUNDLE_DIR } from "./build";

export interface WorkerInstance {
  /** The instance's HTTP address, when started with `port`. */
  url: string | null;
  fetch(path: string, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

/** `port`: also serve real HTTP there (for callers such as the demo origin's purge notifications). */
export async function startWorker(bindings: Env, options: { port?: number } = {}): Promise<WorkerInstance> {
  const mf = new Miniflare({
    ...(options.port ? { host: "127.0.0.1", port: options.port } : {}),
    modules: true,
    scriptPath: join(BUNDLE_DIR, "index.js"),
    modulesRules: [{ type: "Text", include: ["**/*.liquid"] }],
    compatibilityDate: "2026-04-20",
    bindings: Object.fromEntries(Object.entries(bindings).filter(([, value]) => value !== undefined)) as Record<string, string>,
  });
  const url = await mf.ready;
  return {
    url: options.port ? url.origin : null,
    async fetch(path, init) {
      const response = await mf.dispatchFetch(`http://tier.test${path}`, init as never);
      // Read the body at once, so that no connection to workerd stays half-read
      // while a test fires hundreds of requests.
      const body = response.status === 304 ? null : await response.arrayBuffer();
      return new Response(body, { status: response.status, headers: response.headers as unknown as Headers });
    },
    close: () => mf.dispose(),
  };
}
