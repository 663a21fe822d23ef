// The product page: one section per resource of the page (view.ts,
// SectionViews), each laid out by its partial, in pieces in document order.
// A whole page is its pieces joined; a streamed page (http/streamedPage.ts)
// sends each piece once the resources it shows are final, so a piece shows
// only the sections of its `shows`.
//
// Written as hono/html tagged templates rather than JSX, like its partials
// and the layout: this is the page rendered per view, and hono/jsx builds and
// walks a node per element where a tagged template appends constant markup
// around escaped values (the page's templates took a third of the CPU, byte
// for byte the same HTML, measured in Node on the demo catalog). Escaping is
// the same (every value goes through Hono's escapeToBuffer) and the props are
// typed as for any template; the pages rendered once in a while stay JSX.
import { html } from "hono/html";
import type { ProductSections, ProductView } from "../src/render/view";
import { FRAME_END, frameStart } from "./layout";
import { AvailabilityNote } from "./partials/availability";
import { Breadcrumb } from "./partials/breadcrumb";
import { Gallery } from "./partials/gallery";
import { JsonLd } from "./partials/jsonLd";
import { Price } from "./partials/price";
import { Recommendations } from "./partials/recommendations";
import { Reviews } from "./partials/reviews";

/** A piece of the page: the resources whose sections it shows, and its markup from the page's view. */
interface Piece {
  shows: readonly (keyof ProductSections)[];
  render(view: ProductView): ReturnType<typeof html>;
}

/** The head, the breadcrumb and the summary: the product and its stock, what a streamed page sends first. */
function summary({ meta, sections: { product, inventory } }: ProductView) {
  const description = product.description ? html`<h2>Description</h2><div class="description">${product.description}</div>` : null;
  const attributes =
    product.attributes.length > 0
      ? html`<h2>Details</h2><dl class="attributes">${product.attributes.map((attribute) => html`<dt>${attribute.name}</dt><dd>${attribute.value}</dd>`)}</dl>`
      : null;
  return html`${frameStart({ meta })}${Breadcrumb({ crumbs: product.breadcrumb, current: product.title })}<article class="product">${Gallery({ gallery: product.gallery })}<div class="summary"><h1>${product.title}</h1><p class="brand"><span class="visually-hidden">Brand: </span>${product.brand}</p>${Price({ price: product.price })}${AvailabilityNote({ availability: inventory })}${description}${attributes}</div></article>`;
}

export const PRODUCT_PAGE = [
  { shows: ["product", "inventory"], render: summary },
  { shows: ["reviews"], render: ({ sections }) => Reviews({ reviews: sections.reviews }) },
  { shows: ["recommendations"], render: ({ sections }) => html`${Recommendations({ items: sections.recommendations })}` },
  // The structured data carries the reviews' rating: at the end, where it is final on a streamed page too.
  { shows: ["reviews"], render: ({ structuredData }) => html`${JsonLd({ data: structuredData })}${FRAME_END}` },
] as const satisfies readonly Piece[];

// Every resource of the page has its piece: a resource added to the registry fails tsc here until it is placed.
type Unplaced = Exclude<keyof ProductSections, (typeof PRODUCT_PAGE)[number]["shows"][number]>;
type EveryResourcePlaced = [Unplaced] extends [never] ? true : { unplaced: Unplaced };
true satisfies EveryResourcePlaced;

export function ProductPage(view: ProductView) {
  return html`${PRODUCT_PAGE.map((piece) => piece.render(view))}`;
}
