/** Milliseconds since the epoch. Injected so that tests can move time by hand. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
