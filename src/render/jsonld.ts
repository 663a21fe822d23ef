// schema.org structured data for the product page. Built here, in code, as data: the template never
// assembles JSON from pieces, so untrusted text can neither break the JSON nor leave the <script> element.
import { availability, decimalAmount } from "./format";
import type { ProductPageModel } from "./model";
import { isWebUrl } from "./urls";

const SCHEMA_AVAILABILITY = {
  in_stock: "https://schema.org/InStock",
  low_stock: "https://schema.org/LimitedAvailability",
  out_of_stock: "https://schema.org/OutOfStock",
} as const;

/** The schema.org `Product` object for the page, as plain data. */
export function structuredDataFor(model: ProductPageModel): Record<string, unknown> {
  const { product } = model;
  const offer: Record<string, unknown> = {
    "@type": "Offer",
    url: model.pageUrl,
    price: decimalAmount(product.price),
    priceCurrency: product.price.currency,
  };
  const stock = availability(model.inventory);
  // Unknown stock: say nothing rather than promise anything.
  if (stock.state !== "unknown") offer.availability = SCHEMA_AVAILABILITY[stock.state];

  const data: Record<string, unknown> = {
    "@context": "https://schema.org",
    "@type": "Product",
    name: product.title,
    // 5,000 characters: the most of a product's description Google's product data takes (Merchant Center specification).
    description: product.description.slice(0, 5000),
    sku: product.id,
    brand: { "@type": "Brand", name: product.brand },
    url: model.pageUrl,
  };
  const images = product.images.map((image) => image.url).filter(isWebUrl);
  if (images.length > 0) data.image = images;
  data.offers = offer;
  if (model.reviews.state === "ok" && model.reviews.data.count > 0) {
    data.aggregateRating = {
      "@type": "AggregateRating",
      ratingValue: model.reviews.data.rating,
      reviewCount: model.reviews.data.count,
      bestRating: 5,
      worstRating: 1,
    };
  }
  return data;
}

const SCRIPT_ESCAPES: Record<string, string> = { "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029" };

/**
 * JSON that is safe as the text of a <script> element: `<`, `>` and `&` are written as \u escapes (so no `</script>` or `<!--` can appear),
 * and so are U+2028/U+2029 (line terminators to older JavaScript parsers). The result is still JSON that parses to the same value.
 */
export function jsonForScript(value: unknown): string {
  return (JSON.stringify(value) ?? "null").replace(/[<>&\u2028\u2029]/g, (char) => SCRIPT_ESCAPES[char]!);
}
