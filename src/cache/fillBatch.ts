// The Redis calls of one page's fills, made together (issue: Redis commands
// per page). A cold page fills up to four resources: one at a time, that is
// a lock claim and a write each, eight calls on top of the page's MGET.
// Batched, the claims made in one turn of the event loop go out as one
// script run, and the writes of fills that run together go out as one when
// the last of them ends. A write is never held for fills that start later:
// its lock stays taken until it is written, and another isolate waiting on
// that lock would wait longer (the product of a cold page is filled first,
// alone, and written at once).
//
// A batch belongs to one request (the read that created it) and to the fills
// that request starts, which run under its `waitUntil`: nothing in it is
// shared with another request (docs/architecture.md#sharing-work-across-requests-in-one-isolate).
// A fill of another request that joins one of these fills waits for the fill,
// not for the batch. Waiting for the last fill under way delays a write by at
// most the longest of them, which is bounded by its origin timeout.
import type { ClaimOptions, FillClaim, FillClaimRequest, FillWrite, L2 } from "./l2";

/** What a fill asks of L2 for its lock and its result: `L2` itself, or a batch of one request's fills. */
export interface FillCalls {
  claimFill(key: string, lock: string, claim: ClaimOptions): Promise<FillClaim | undefined>;
  writeFill(write: FillWrite): Promise<boolean | undefined>;
}

export interface FillBatch extends FillCalls {
  /** A fill of this batch starts; `end` when it has made its write (or will make none): the writes go out when none is under way. */
  begin(): void;
  end(): void;
}

export function createFillBatch(l2: L2, background: (work: Promise<unknown>) => void): FillBatch {
  let claims: { request: FillClaimRequest; done: (claim: FillClaim | undefined) => void }[] = [];
  let writes: { write: FillWrite; done: (written: boolean | undefined) => void }[] = [];
  let running = 0;

  function sendClaims(): void {
    const sending = claims;
    claims = [];
    void l2
      .claimFills(
        sending.map(({ request }) => request),
        { background },
      )
      .then((answers) => sending.forEach(({ done }, i) => done(answers[i])));
  }

  function sendWrites(): void {
    if (writes.length === 0 || running > 0) return;
    const sending = writes;
    writes = [];
    background(l2.writeFills(sending.map(({ write }) => write)).then((written) => sending.forEach(({ done }, i) => done(written[i]))));
  }

  return {
    claimFill(key, lock, claim) {
      return new Promise((done) => {
        // The first claim of a turn sends them all once the turn's other fills have made theirs.
        if (claims.length === 0) queueMicrotask(sendClaims);
        claims.push({ request: { key, lock, claim }, done });
      });
    },
    writeFill(write) {
      return new Promise((done) => {
        writes.push({ write, done });
        sendWrites();
      });
    },
    begin() {
      running++;
    },
    end() {
      running--;
      sendWrites();
    },
  };
}
