// The Redis calls of one page's fills, made together: the lock claims made in one turn of the event loop go out as one script run (with
// other requests' claims and the writes waiting then: outbox.ts), and the waits of claims that lost poll L2 together, one MGET a round for
// every key still waited for (waits polling apart would spend the request's subrequests).
//
// A batch belongs to one request and the fills it starts: nothing in it is shared with another request; a fill of another request that
// joins one of these fills waits for the fill, not for the batch.
import type { Background } from "../../shared/subrequests";
import type { Outbox } from "./outbox";
import type { ClaimOptions, FillClaim, FillClaimRequest, L2 } from "./l2";

/** What one poll of a lock wait read: the key's value and the lock's holder (null: none), or undefined (the read failed or was skipped). */
type LockPoll = [value: string | null | undefined, holder: string | null | undefined];

/** How a fill claims its lock and polls for the winner's result: through a batch of one request's fills (a fill on its own: a batch of one). */
export interface FillCalls {
  claimFill(key: string, lock: string, claim: ClaimOptions, patient?: () => boolean): Promise<FillClaim | undefined>;
  /** Reads `key` and `lock` about `delayMs` from now, with the other polls of its round. */
  pollLock(key: string, lock: string, delayMs: number): Promise<LockPoll>;
}

/** `outbox`: the isolate's claims and writes, which these join (outbox.ts); without it, each batch makes its own call. */
export function createFillBatch(l2: L2, sleep: (ms: number) => Promise<void>, background: Background, outbox?: Outbox): FillCalls {
  let claims: { request: FillClaimRequest; done: (claim: FillClaim | undefined) => void }[] = [];
  /** The next poll round's waiters; the round is scheduled when the first of them asks. */
  let polls: { key: string; lock: string; done: (poll: LockPoll) => void }[] = [];

  function sendClaims(): void {
    const sending = claims;
    claims = [];
    const requests = sending.map(({ request }) => request);
    void (outbox ? outbox.claim(requests, background) : l2.claimFills(requests, { background })).then((answers) =>
      sending.forEach(({ done }, i) => done(answers[i])),
    );
  }

  async function pollRound(delayMs: number): Promise<void> {
    await sleep(delayMs);
    const round = polls;
    polls = [];
    const keys = round.flatMap(({ key, lock }) => [key, lock]);
    const values = await l2.readMany(keys, { background }).catch((): undefined[] => []);
    round.forEach(({ done }, i) => done([values[2 * i], values[2 * i + 1]]));
  }

  return {
    claimFill(key, lock, claim, patient) {
      return new Promise((done) => {
        // The first claim of a turn sends them all once the turn's other fills have made theirs.
        if (claims.length === 0) queueMicrotask(sendClaims);
        claims.push({ request: { key, lock, claim, patient }, done });
      });
    },
    pollLock(key, lock, delayMs) {
      return new Promise((done) => {
        // The waits of one claim call lost together and poll on the same schedule: the first to ask sets the round's time.
        if (polls.length === 0) void pollRound(delayMs);
        polls.push({ key, lock, done });
      });
    },
  };
}
