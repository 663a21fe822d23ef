// Visitors who leave: a small load beside wrk's, each request for a
// Zipf-drawn product on a socket of its own, closed 1–30 ms after it was
// sent, whatever the worker was doing with it. In Workers the request is
// then cancelled, and what it held (fills, limiter slots, locks) must not
// outlive it (docs/architecture.md#sharing-work-across-requests-in-one-isolate).
import { request } from "node:http";

export interface CancelCounts {
  /** Requests started. */
  sent: number;
  /** Written to the socket and closed before any answer came: really cancelled mid-request. */
  abortedInFlight: number;
  /** Closed before the request was even written (the worker never saw it). */
  abortedUnsent: number;
  /** Answered (headers in) before the close. */
  answered: number;
}

const TICK_MS = 20;
const zero = (): CancelCounts => ({ sent: 0, abortedInFlight: 0, abortedUnsent: 0, answered: 0 });

export function startCancellers(targets: string[], nextPath: () => string, perSecond: number) {
  let rate = perSecond;
  let credit = 0;
  let counts = zero();
  const total = zero();
  let pending = 0;
  const count = (key: keyof CancelCounts) => (counts[key]++, total[key]++);

  const send = () => {
    const req = request(`${targets[total.sent % targets.length]}${nextPath()}`, { agent: false });
    count("sent");
    pending++;
    let answered = false;
    let written = false;
    req.on("response", (res) => ((answered = true), res.resume().on("error", () => undefined)));
    req.on("finish", () => (written = true));
    req.on("error", () => undefined); // our own destroy() and its "socket hang up"
    req.on("close", () => pending--);
    req.end();
    setTimeout(
      () => {
        count(answered ? "answered" : written ? "abortedInFlight" : "abortedUnsent");
        // A reset, as a closed tab or a lost mobile connection often is: workerd
        // cancels the request at once (a plain close it notices only when it writes).
        if (req.socket && !answered) req.socket.resetAndDestroy();
        else req.destroy();
      },
      1 + Math.random() * 29,
    );
  };
  const timer = setInterval(() => {
    credit += (rate * TICK_MS) / 1000;
    for (; credit >= 1; credit--) send();
  }, TICK_MS);

  return {
    setRate: (perSecondNow: number) => void (rate = perSecondNow),
    get rate() {
      return rate;
    },
    /** Counts since the last call. */
    take(): CancelCounts {
      const taken = counts;
      counts = zero();
      return taken;
    },
    total,
    /** Stops sending; resolves once every socket is closed (at most ~30 ms later). */
    async stop(): Promise<void> {
      clearInterval(timer);
      for (let waited = 0; pending > 0 && waited < 2000; waited += 10) await new Promise((done) => setTimeout(done, 10));
    },
  };
}
