// What a benchmark run started, and how to stop it: stops run last-started
// first, each bounded in time, once, whether the run ends, fails or is
// interrupted (Ctrl-C, SIGTERM). Shared by every benchmark.

interface Cleanups {
  /** Registers a stop; the returned function runs it early (end of a scenario) and removes it from the list. */
  onCleanup(name: string, stop: () => Promise<void>): () => Promise<void>;
  /** Stops everything still registered; later calls share the first one's work. */
  cleanUp(): Promise<void>;
}

function createCleanups(stepTimeoutMs: number): Cleanups {
  const cleanups: { name: string; stop: () => Promise<void> }[] = [];
  let cleaning: Promise<void> | undefined;

  async function stopAll(): Promise<void> {
    while (cleanups.length) {
      const { name, stop } = cleanups.pop()!;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((done) => (timer = setTimeout(() => done(console.error(`cleanup: ${name} did not stop in time`)), stepTimeoutMs)));
      await Promise.race([stop().catch((err: unknown) => console.error(`cleanup: ${name}: ${String(err)}`)), timeout]);
      clearTimeout(timer);
    }
  }

  return {
    onCleanup(name, stop) {
      const entry = { name, stop };
      cleanups.push(entry);
      return async () => {
        const index = cleanups.indexOf(entry);
        if (index < 0) return; // already stopped by cleanUp()
        cleanups.splice(index, 1);
        await stop();
      };
    },
    cleanUp() {
      cleaning ??= stopAll();
      return cleaning;
    },
  };
}

/**
 * A benchmark run: its cleanups, and SIGINT / SIGTERM handled. The first
 * signal aborts `signal` (the load), stops what was started and exits 130; a
 * second one, later than tsx's and npm's relay of the same Ctrl-C (1.5 s),
 * exits at once (exit hooks still kill the children). `run(main)` runs the
 * benchmark, then stops what it started and exits: 130 when it was
 * interrupted, 1 when it failed (with the error), 0 otherwise.
 */
export function benchmarkRun(name: string, stepTimeoutMs = 10_000) {
  const cleanups = createCleanups(stepTimeoutMs);
  const abort = new AbortController();
  let firstSignalAt = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (firstSignalAt) {
      if (Date.now() - firstSignalAt > 1500) process.exit(130);
      return;
    }
    firstSignalAt = Date.now();
    abort.abort();
    process.stderr.write(`\n${signal}: stopping…\n`);
    void cleanups.cleanUp().finally(() => process.exit(130));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const interrupted = () => firstSignalAt > 0;
  return {
    ...cleanups,
    signal: abort.signal,
    /** Aborts `signal` without a signal (the end of a run: pollers still going stop). */
    abortLoad: () => abort.abort(),
    /** This run's own SIGINT / SIGTERM listener (to keep, when other listeners are removed). */
    onSignal,
    interrupted,
    run: (main: () => Promise<void>) => runThenExit(name, main, cleanups.cleanUp, interrupted),
  };
}

function runThenExit(name: string, main: () => Promise<void>, cleanUp: () => Promise<void>, interrupted: () => boolean): void {
  main().then(
    async () => {
      await cleanUp();
      process.exit(interrupted() ? 130 : 0);
    },
    async (err: unknown) => {
      console.error(`\n${name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      await cleanUp();
      process.exit(interrupted() ? 130 : 1);
    },
  );
}
