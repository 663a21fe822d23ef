// The product page: one section per resource of the page (view.ts,
// SectionViews), each laid out by its partial.
//
// Written as hono/html tagged templates rather than JSX, like its partials
// and the layout: this is the page rendered per view, and hono/jsx builds and
// walks a node per element where a tagged template appends constant markup
// around escaped values (the page's templates took a third of the CPU, byte
// for byte the same HTML, measured in Node on the demo catalog). Escaping is
// the same (every value goes through Hono's escapeToBuffer) and the props are
// typed as for any template; the pages rendered once in a while stay JSX.
import { html } from "hono/html";
import type { ProductView } from "../src/render/view";
import { Layout } from "./layout";
import { AvailabilityNote } from "./partials/availability";
import { Breadcrumb } from "./partials/breadcrumb";
import { Gallery } from "./partials/gallery";
import { JsonLd } from "./partials/jsonLd";
import { Price } from "./partials/price";
import { Recommendations } from "./partials/recommendations";
import { Reviews } from "./partials/reviews";

export function ProductPage({ meta, structuredData, sections }: ProductView) {
  // Every section has its place below: the section of a resource added to the
  // registry lands in `unplaced`, which then fails tsc until it is placed.
  const { product, inventory, reviews, recommendations, ...unplaced } = sections;
  unplaced satisfies Record<string, never>;
  const description = product.description ? html`<h2>Description</h2><div class="description">${product.description}</div>` : null;
  const attributes =
    product.attributes.length > 0
      ? html`<h2>Details</h2><dl class="attributes">${product.attributes.map((attribute) => html`<dt>${attribute.name}</dt><dd>${attribute.value}</dd>`)}</dl>`
      : null;
  return Layout({
    meta,
    head: JsonLd({ data: structuredData }),
    children: html`${Breadcrumb({ crumbs: product.breadcrumb, current: product.title })}<article class="product">${Gallery({ gallery: product.gallery })}<div class="summary"><h1>${product.title}</h1><p class="brand"><span class="visually-hidden">Brand: </span>${product.brand}</p>${Price({ price: product.price })}${AvailabilityNote({ availability: inventory })}${description}${attributes}</div></article>${Reviews({ reviews })}${Recommendations({ items: recommendations })}`,
  });
}
