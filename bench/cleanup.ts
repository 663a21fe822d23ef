// What a benchmark run started, and how to stop it: stops run last-started
// first, each bounded in time, once, whether the run ends, fails or is
// interrupted. Shared by `npm run bench`, `bench:peers` and `bench:soak`.

export interface Cleanups {
  /** Registers a stop; the returned function runs it early (end of a scenario) and removes it from the list. */
  onCleanup(name: string, stop: () => Promise<void>): () => Promise<void>;
  /** Stops everything still registered; later calls share the first one's work. */
  cleanUp(): Promise<void>;
}

export function createCleanups(stepTimeoutMs: number): Cleanups {
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
 * Runs a benchmark's `main`, then stops what it started and exits: 130 when
 * it was interrupted, 1 when it failed (with the error), 0 otherwise.
 */
export function runThenExit(name: string, main: () => Promise<void>, cleanUp: () => Promise<void>, interrupted: () => boolean): void {
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
