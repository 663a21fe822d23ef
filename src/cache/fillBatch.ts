// The Redis calls of one page's fills, made together (issue: Redis commands
// per page). A cold page fills up to four resources: one at a time, that is
// a lock claim and a write each, eight calls on top of the page's MGET.
// Batched, the claims made in one turn of the event loop go out as one
// script run, and the writes wait until every fill of the batch has ended,
// then go out as one.
//
// A batch belongs to one request (the read that created it) and to the fills
// that request starts, which run under its `waitUntil`: nothing in it is
// shared with another request (design.md, "Sharing work across requests").
// A fill of another request that joins one of these fills waits for the fill,
// not for the batch. Waiting for the batch's last fill delays a write by at
// most the longest fill, which is bounded by its origin timeout.
import type { ClaimOptions, FillClaim, FillClaimRequest, FillWrite, L2 } from "./l2";

/** What a fill asks of L2 for its lock and its result: `L2` itself, or a batch of one request's fills. */
export interface FillCalls {
  claimFill(key: string, lock: string, claim: ClaimOptions): Promise<FillClaim | undefined>;
  writeFill(write: FillWrite): Promise<boolean | undefined>;
}

export interface FillBatch extends FillCalls {
  /** A fill of this batch starts; `end` when it has made its write (or will make none). */
  begin(): void;
  end(): void;
  /** No more fills will begin: the writes go out once those under way have ended. */
  close(): void;
}

export function createFillBatch(l2: L2, background: (work: Promise<unknown>) => void): FillBatch {
  let claims: { request: FillClaimRequest; done: (claim: FillClaim | undefined) => void }[] = [];
  let writes: { write: FillWrite; done: (written: boolean | undefined) => void }[] = [];
  let running = 0;
  let closed = false;

  function sendClaims(): void {
    const sending = claims;
    claims = [];
    void l2.claimFills(sending.map(({ request }) => request)).then((answers) => sending.forEach(({ done }, i) => done(answers[i])));
  }

  function sendWrites(): void {
    if (writes.length === 0 || running > 0 || !closed) return;
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
    close() {
      closed = true;
      sendWrites();
    },
  };
}
