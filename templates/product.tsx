// The product page: one section per resource of the page (view.ts,
// SectionViews), each laid out by its partial.
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
  return (
    <Layout meta={meta} head={<JsonLd data={structuredData} />}>
      <Breadcrumb crumbs={product.breadcrumb} current={product.title} />
      <article class="product">
        <Gallery gallery={product.gallery} />
        <div class="summary">
          <h1>{product.title}</h1>
          <p class="brand">
            <span class="visually-hidden">Brand: </span>
            {product.brand}
          </p>
          <Price price={product.price} />
          <AvailabilityNote availability={inventory} />
          {product.description ? (
            <>
              <h2>Description</h2>
              <div class="description">{product.description}</div>
            </>
          ) : null}
          {product.attributes.length > 0 ? (
            <>
              <h2>Details</h2>
              <dl class="attributes">
                {product.attributes.map((attribute) => (
                  <>
                    <dt>{attribute.name}</dt>
                    <dd>{attribute.value}</dd>
                  </>
                ))}
              </dl>
            </>
          ) : null}
        </div>
      </article>
      <Reviews reviews={reviews} />
      <Recommendations items={recommendations} />
    </Layout>
  );
}
