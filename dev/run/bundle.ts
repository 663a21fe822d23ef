// The deployed bundle in workerd through Miniflare, as the integration tests
// (test/support/worker.ts) and the benchmarks (bench/stack.ts) run it: one
// module (the templates are compiled into it), the compatibility date and
// flags of wrangler.toml (dev/compatibility.ts), and the worker's output read
// as lines rather than printed. Each caller adds what is its own: ports, the inspector, where the
// lines go.
import { Log, LogLevel, type MiniflareOptions } from "miniflare";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { compatibilityDate, compatibilityFlags } from "../compatibility";

/** Miniflare's options for the bundle in `bundleDir` (`wrangler deploy --dry-run --outdir`) with `bindings`. */
export function bundleOptions(bundleDir: string, bindings: Record<string, string>) {
  return {
    modules: true,
    scriptPath: join(bundleDir, "index.js"),
    // As wrangler.toml says, so that the runtime behaves as it does when deployed.
    compatibilityDate,
    compatibilityFlags,
    bindings,
  } satisfies MiniflareOptions;
}

/**
 * Miniflare's own warnings and errors, one line at a time, without colours
 * (the lines end up in reports and test messages). An exception that escaped
 * the worker's fetch handler becomes a 500 that only this log reports.
 */
export class CapturingLog extends Log {
  constructor(private readonly keep: (line: string) => void) {
    super(LogLevel.WARN);
  }

  protected override log(message: string): void {
    for (const line of message.replace(/\x1b\[[0-9;]*m/g, "").split("\n")) this.keep(`[miniflare] ${line}`);
  }
}

/** Splits a stream (workerd's stdout or stderr) into lines for `keep`; resolves when the stream has ended (or closed). */
export function readLines(stream: Readable, keep: (line: string) => void): Promise<void> {
  let rest = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    const lines = (rest + chunk).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) keep(line);
  });
  return new Promise((resolve) => {
    const done = () => {
      if (rest) keep(rest);
      rest = "";
      resolve();
    };
    stream.once("end", done);
    stream.once("close", done);
    stream.once("error", done);
  });
}
