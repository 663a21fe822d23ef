// A streamed product page (docs/architecture.md, "Streamed pages"): its core parts are read while others still come from the
// origin. It goes out in its pieces in document order (render/index.ts, PRODUCT_PAGE_PIECES), each once the parts it shows
// are final: their answer, or their section's default when their read failed or ran past its fill's bound. Every piece is
// plain HTML in its place (no script: the CSP stays as strict), so the document is whole however each section ends.
import { failed, type Served } from "../cache/served";
import type { PageResource } from "../origin/resources";
import type { PagePiece } from "../render";
import type { ProductPageModel, Section } from "../render/model";
import { within } from "../shared/leases";

/** How a streamed page ended: every part's final answer, the parts past their bound, and whether its visitor left before the end. */
export interface StreamEnd {
  served: Served<unknown>[];
  late: PageResource[];
  left: boolean;
}

export interface StreamOptions {
  pieces: readonly PagePiece[];
  /** The model with the parts read before the first byte; each later part's section is set as it arrives. */
  model: ProductPageModel;
  /** What the core's read gave, in the page's order; the later parts follow it. */
  served: Served<unknown>[];
  /** Each later part's read (cache/pageRequest.ts, LaterParts). */
  later: { [R in PageResource]?: Promise<Served<unknown>> };
  /** The section a part's answer gives (productPage.ts). */
  section(resource: PageResource, served: Served<unknown>): Section<unknown>;
  /** The longest a later part's read may take: its fill's bound. */
  boundMs(resource: PageResource): number;
  /** The visitor's request signal: aborted when they leave (workerd may then cancel the body, or not). */
  visitor: AbortSignal;
  /** Stops the page's remaining work (its visitor left mid-stream). */
  leave(): void;
  /** Called once, as the stream ends or is cancelled. */
  ended(end: StreamEnd): void;
}

/**
 * The page's body. Its first piece is rendered before this returns, so that a template that fails on it fails the
 * page as a whole page's would (a 500, before any byte); a later piece that fails gets its sections' defaults.
 */
export async function streamedBody(options: StreamOptions): Promise<ReadableStream<Uint8Array>> {
  const { pieces, model, later } = options;
  const served = [...options.served];
  const late: PageResource[] = [];
  const encoder = new TextEncoder();
  let next = 0;
  let ended = false;
  const end = (left: boolean) => {
    if (ended) return;
    ended = true;
    options.visitor.removeEventListener("abort", gone);
    if (left) options.leave();
    options.ended({ served, late, left });
  };
  const gone = () => end(true);
  options.visitor.addEventListener("abort", gone, { once: true });

  /** The part's final answer: its read's, or a failure past its bound (a read that throws is a failure too). */
  async function settle(resource: PageResource): Promise<void> {
    const read = later[resource];
    if (!read || served.some((part) => part.resource === resource)) return;
    const past = failed(resource, { forward: "miss", failure: "timeout" });
    const answer = await within(
      read.catch(() => failed(resource, { forward: "miss", failure: "unreachable" })),
      options.boundMs(resource),
      () => past,
    );
    if (answer === past) late.push(resource);
    served.push(answer);
    (model as Record<string, unknown>)[resource] = options.section(resource, answer);
  }

  /** A piece whose template fails on its sections' data gets their defaults instead: the document still closes. */
  function render(piece: PagePiece): string {
    try {
      return piece.render(model);
    } catch {
      for (const resource of piece.shows) (model as Record<string, unknown>)[resource] = { state: "unavailable" };
      return piece.render(model);
    }
  }

  const [head, ...rest] = pieces;
  await Promise.all(head!.shows.map(settle));
  const first = encoder.encode(head!.render(model));
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(first);
    },
    // One piece a pull (a piece with nothing to show is none): written as the visitor reads, not before its parts are final.
    async pull(controller) {
      for (let piece = rest[next++]; piece; piece = rest[next++]) {
        await Promise.all(piece.shows.map(settle));
        const html = render(piece);
        if (html) return controller.enqueue(encoder.encode(html));
      }
      controller.close();
      end(false);
    },
    cancel() {
      end(true);
    },
  });
}
