// The lock claims of one page's fills, made together (issue: Redis commands
// per page). A cold page fills up to four resources: the claims made in one
// turn of the event loop go out as one script run. Their writes go out with
// the isolate's other writes (fill.ts, sendQueue.ts).
//
// A batch belongs to one request (the read that created it) and to the fills
// that request starts: nothing in it is shared with another request
// (docs/architecture.md#sharing-work-across-requests-in-one-isolate). A fill
// of another request that joins one of these fills waits for the fill, not
// for the batch.
import type { ClaimOptions, FillClaim, FillClaimRequest, L2 } from "./l2";

/** How a fill claims its lock: through `L2` itself, or a batch of one request's fills. */
export interface FillCalls {
  claimFill(key: string, lock: string, claim: ClaimOptions): Promise<FillClaim | undefined>;
}

export function createFillBatch(l2: L2, background: (work: Promise<unknown>) => void): FillCalls {
  let claims: { request: FillClaimRequest; done: (claim: FillClaim | undefined) => void }[] = [];

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

  return {
    claimFill(key, lock, claim) {
      return new Promise((done) => {
        // The first claim of a turn sends them all once the turn's other fills have made theirs.
        if (claims.length === 0) queueMicrotask(sendClaims);
        claims.push({ request: { key, lock, claim }, done });
      });
    },
  };
}
