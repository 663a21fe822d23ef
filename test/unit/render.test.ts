import { describe, expect, it } from "vitest";
import type { Inventory, Product, Recommendations, ReviewsSummary } from "../../src/origin/types";
import type { ProductPageModel } from "../../src/render/model";
import { validateResource } from "../../src/origin/validate";
import { renderErrorPage, renderHomePage, renderProductPage } from "../../src/render/index";
import { AVAILABILITY_UNKNOWN_TEXT, decimalAmount, discountPercent, formatMoney, minorDigits, truncateText } from "../../src/render/format";
import { jsonForScript, structuredDataFor } from "../../src/render/jsonld";
import { shownImages } from "../../src/render/view";
import { preloadLink } from "../../src/http/headers";
import { samplePageModel } from "../support/fakes";

const HOSTILE = `<script>alert(1)</script> "x" & 'y'`;
const HOSTILE_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt; &quot;x&quot; &amp; &#39;y&#39;";

function product(overrides: Partial<Product> = {}): Product {
  return {
    id: "p-000123",
    title: "Trail Runner 2",
    description:
      "A light trail shoe with a grippy outsole and a breathable mesh upper. " +
      "Built for long days on rocky paths, it keeps its shape mile after mile.\n\n" +
      "Cushioned midsole, reinforced toe cap, recycled laces. ".repeat(6),
    brand: "Acme",
    category: ["Shoes", "Running"],
    price: { amount: 12999, currency: "USD" },
    compareAtPrice: { amount: 15999, currency: "USD" },
    images: [
      { url: "https://img.example/p-000123/1.jpg", alt: "Side view" },
      { url: "https://img.example/p-000123/2.jpg", alt: "" },
      { url: "https://img.example/p-000123/3.jpg", alt: "Sole" },
      { url: "https://img.example/p-000123/4.jpg", alt: "Top view" },
    ],
    attributes: { color: "Red", size: "42", material: "Mesh" },
    tags: ["brand:acme", "cat:running"],
    version: 17,
    updatedAt: "2026-11-20T10:00:00Z",
    ...overrides,
  };
}

function inventory(overrides: Partial<Inventory> = {}): Inventory {
  return { id: "p-000123", available: 12, status: "in_stock", version: 903, updatedAt: "2026-11-20T10:00:00Z", ...overrides };
}

function reviews(overrides: Partial<ReviewsSummary> = {}): ReviewsSummary {
  return {
    id: "p-000123",
    rating: 4.6,
    count: 213,
    top: [
      { author: "Sam", rating: 5, title: "Great grip", body: "Held on wet rocks.\nVery comfortable." },
      { author: "Kim", rating: 4, title: "Runs small", body: "Order half a size up." },
      { author: "Lee", rating: 4, title: "Solid", body: "Good value for the price." },
    ],
    version: 4,
    ...overrides,
  };
}

function recommendations(count = 8): Recommendations {
  return {
    id: "p-000123",
    items: Array.from({ length: count }, (_, i) => ({
      id: `p-000${456 + i}`,
      title: `Trail Sock ${i + 1}`,
      price: { amount: 1499 + i * 100, currency: "USD" },
      image: `https://img.example/p-000${456 + i}/1.jpg`,
    })),
    version: 2,
  };
}

function model(overrides: Partial<ProductPageModel> = {}): ProductPageModel {
  return {
    ...samplePageModel("p-000123"),
    product: product(),
    inventory: { state: "ok", data: inventory() },
    reviews: { state: "ok", data: reviews() },
    recommendations: { state: "ok", data: recommendations() },
    pageUrl: "https://shop.example/products/p-000123",
    ...overrides,
  };
}

function jsonLdText(html: string): string {
  const match = /<script type="application\/ld\+json">([\s\S]*?)<\/script>/.exec(html);
  if (!match?.[1]) throw new Error("no JSON-LD in page");
  return match[1];
}

function jsonLd(html: string): Record<string, any> {
  return JSON.parse(jsonLdText(html)) as Record<string, any>;
}

function count(html: string, pattern: RegExp): number {
  return (html.match(new RegExp(pattern.source, "g")) ?? []).length;
}

/** Content of the first `<name ...attrs...>` element (`attrs` is a regex source); no nesting of the same name. */
function tagText(html: string, name: string, attrs = ""): string {
  const match = new RegExp(`<${name}${attrs ? ` ${attrs}` : ""}[^>]*>([\\s\\S]*?)</${name}>`).exec(html);
  if (!match) throw new Error(`no <${name} ${attrs}>`);
  return match[1] ?? "";
}

function metaContent(html: string, attr: "name" | "property", key: string): string | undefined {
  return new RegExp(`<meta ${attr}="${key.replace(/[.:]/g, "\\$&")}" content="([^"]*)"/>`).exec(html)?.[1];
}

function imgTags(html: string): string[] {
  return html.match(/<img\b[^>]*>/g) ?? [];
}

describe("format", () => {
  it("formats money by currency, with its own minor digits", () => {
    expect(formatMoney({ amount: 12999, currency: "USD" })).toBe("$129.99");
    expect(formatMoney({ amount: 12999, currency: "EUR" })).toBe("€129.99");
    expect(formatMoney({ amount: 1500, currency: "JPY" })).toBe("¥1,500");
    expect(formatMoney({ amount: 12345, currency: "KWD" })).toMatch(/^KWD\s12\.345$/);
    expect(minorDigits("JPY")).toBe(0);
    expect(minorDigits("KWD")).toBe(3);
    // The page's figure and the JSON-LD's decimal agree to the cent, up to the largest amount the contract takes.
    const largest = { amount: Number.MAX_SAFE_INTEGER, currency: "USD" };
    expect(formatMoney(largest)).toBe("$90,071,992,547,409.91");
    expect(decimalAmount(largest)).toBe("90071992547409.91");
    expect(formatMoney({ amount: -5, currency: "USD" })).toBe("-$0.05");
    expect(minorDigits("USD")).toBe(2);
  });

  it("never throws on an unknown or malformed currency", () => {
    expect(formatMoney({ amount: 1234, currency: "XYZ" })).toBe("12.34 XYZ");
    expect(() => formatMoney({ amount: 1234, currency: "us" })).not.toThrow();
    expect(formatMoney({ amount: 1234, currency: "us" })).toBe("12.34 us");
    expect(formatMoney({ amount: 5, currency: "" })).toBe("0.05");
  });

  it("writes decimal amounts without floating point noise", () => {
    expect(decimalAmount({ amount: 12999, currency: "USD" })).toBe("129.99");
    expect(decimalAmount({ amount: 5, currency: "USD" })).toBe("0.05");
    expect(decimalAmount({ amount: 1500, currency: "JPY" })).toBe("1500");
    expect(decimalAmount({ amount: 12345, currency: "KWD" })).toBe("12.345");
    expect(decimalAmount({ amount: 1, currency: "XYZ" })).toBe("0.01");
  });

  it("computes discounts only against a higher price in the same currency", () => {
    expect(discountPercent({ amount: 12999, currency: "USD" }, { amount: 15999, currency: "USD" })).toBe(19);
    expect(discountPercent({ amount: 12999, currency: "USD" }, { amount: 12999, currency: "USD" })).toBeNull();
    expect(discountPercent({ amount: 12999, currency: "USD" }, { amount: 9999, currency: "USD" })).toBeNull();
    expect(discountPercent({ amount: 12999, currency: "USD" }, { amount: 15999, currency: "EUR" })).toBeNull();
    expect(discountPercent({ amount: 12999, currency: "USD" }, undefined)).toBeNull();
  });

  it("truncates at a word boundary within the limit", () => {
    const long = "word ".repeat(100);
    const cut = truncateText(long, 160);
    expect(cut.length).toBeLessThanOrEqual(160);
    expect(cut.endsWith("word…")).toBe(true);
    expect(truncateText("  short\n text ", 160)).toBe("short text");
  });

  it("makes JSON safe for a script element and keeps it parseable", () => {
    const value = { a: "</script><!-- & \u2028\u2029 >" };
    const text = jsonForScript(value);
    expect(text).not.toMatch(/[<>&\u2028\u2029]/);
    expect(JSON.parse(text)).toEqual(value);
  });
});

describe("product page", () => {
  it("escapes a hostile title everywhere it appears", () => {
    const html = renderProductPage(model({ product: product({ title: HOSTILE }) }));
    expect(html).not.toContain("<script>alert");
    expect(html).not.toContain(HOSTILE);
    // The only script element is the JSON-LD one.
    expect(count(html, /<script/)).toBe(1);
    expect(count(html, /<\/script>/)).toBe(1);
    expect(tagText(html, "title")).toContain(HOSTILE_ESCAPED);
    expect(tagText(html, "h1")).toBe(HOSTILE_ESCAPED);
    expect(metaContent(html, "property", "og:title")).toBe(HOSTILE_ESCAPED);
    expect(metaContent(html, "name", "twitter:title")).toBe(HOSTILE_ESCAPED);
    // JSON-LD carries the title as data, with no raw markup characters.
    expect(jsonLdText(html)).not.toMatch(/[<>&]/);
    expect(jsonLd(html).name).toBe(HOSTILE);
  });

  it("escapes untrusted text in every section", () => {
    const evil = "<img src=x onerror=alert(1)>";
    const html = renderProductPage(
      model({
        product: product({
          brand: evil,
          description: evil,
          category: [evil],
          attributes: { [evil]: evil },
          images: [{ url: "https://img.example/a.jpg", alt: `" onload="alert(1)` }],
        }),
        reviews: { state: "ok", data: reviews({ top: [{ author: evil, rating: 5, title: evil, body: evil }] }) },
        recommendations: {
          state: "ok",
          data: { id: "p-000123", items: [{ id: "p-9", title: evil, price: { amount: 1, currency: evil }, image: "https://img.example/r.jpg" }], version: 1 },
        },
      }),
    );
    expect(html).not.toContain("<img src=x");
    expect(html).not.toContain('" onload="');
    expect(html).toContain("&lt;img src=x onerror=alert(1)&gt;");
  });

  it("drops non-web image URLs", () => {
    const html = renderProductPage(
      model({
        product: product({
          images: [
            { url: "javascript:alert(1)", alt: "x" },
            { url: "https://img.example/ok.jpg", alt: "ok" },
          ],
        }),
      }),
    );
    expect(html).not.toContain("javascript:");
    expect(imgTags(html)[0]).toContain('src="https://img.example/ok.jpg"');
    expect(jsonLd(html).image).not.toContain("javascript:alert(1)");
  });

  it("emits valid JSON-LD with name, price, currency and availability", () => {
    const html = renderProductPage(model());
    const data = jsonLd(html);
    expect(data["@context"]).toBe("https://schema.org");
    expect(data["@type"]).toBe("Product");
    expect(data.name).toBe("Trail Runner 2");
    expect(data.sku).toBe("p-000123");
    expect(data.brand).toEqual({ "@type": "Brand", name: "Acme" });
    expect(data.image).toEqual(product().images.map((i) => i.url));
    expect(data.offers.price).toBe("129.99");
    expect(data.offers.priceCurrency).toBe("USD");
    expect(data.offers.availability).toBe("https://schema.org/InStock");
    expect(data.aggregateRating).toMatchObject({ ratingValue: 4.6, reviewCount: 213 });
    expect(jsonLdText(html)).toBe(jsonForScript(structuredDataFor(model())));
  });

  it("keeps a description containing </script> inside the JSON-LD", () => {
    const description = `Nice </script><script>alert(1)</script><!-- \u2028 & done`;
    const html = renderProductPage(model({ product: product({ description }) }));
    expect(count(html, /<\/script>/)).toBe(1);
    expect(html).not.toContain("<script>alert");
    expect(jsonLd(html).description).toBe(description);
  });

  it("maps stock to schema.org availability and omits it when unknown", () => {
    const low = jsonLd(renderProductPage(model({ inventory: { state: "ok", data: inventory({ status: "low_stock", available: 3 }) } })));
    expect(low.offers.availability).toBe("https://schema.org/LimitedAvailability");
    const out = jsonLd(renderProductPage(model({ inventory: { state: "ok", data: inventory({ status: "out_of_stock", available: 0 }) } })));
    expect(out.offers.availability).toBe("https://schema.org/OutOfStock");
    const unknown = jsonLd(renderProductPage(model({ inventory: { state: "unavailable" } })));
    expect(unknown.offers).not.toHaveProperty("availability");
    expect(unknown.offers.price).toBe("129.99");
  });

  it("has exactly one h1", () => {
    expect(count(renderProductPage(model()), /<h1[\s>]/)).toBe(1);
    expect(count(renderProductPage(model({ reviews: { state: "none" }, recommendations: { state: "none" } })), /<h1[\s>]/)).toBe(1);
  });

  it("has the document basics: lang, charset, viewport, title, description, canonical", () => {
    const html = renderProductPage(model());
    expect(html.startsWith("<!doctype html>")).toBe(true);
    expect(html).toContain('<html lang="en">');
    expect(html).toContain('<meta charset="utf-8"/>');
    expect(html).toContain('<meta name="viewport" content="width=device-width, initial-scale=1"/>');
    expect(tagText(html, "title")).toBe("Trail Runner 2 · Acme");
    expect(html).toContain('<link rel="canonical" href="https://shop.example/products/p-000123"/>');
    // No external fonts, stylesheets or scripts.
    expect(html).not.toMatch(/<link rel="stylesheet"|<script src=/);
  });

  it("derives the meta description from the description, truncated", () => {
    const html = renderProductPage(model());
    const description = metaContent(html, "name", "description");
    expect(description).toBeDefined();
    expect(description!.length).toBeLessThanOrEqual(160);
    expect(description!.startsWith("A light trail shoe with a grippy outsole")).toBe(true);
    expect(description!.endsWith("…")).toBe(true);
  });

  it("has OpenGraph tags", () => {
    const html = renderProductPage(model());
    expect(metaContent(html, "property", "og:type")).toBe("product");
    expect(metaContent(html, "property", "og:title")).toBe("Trail Runner 2");
    expect(metaContent(html, "property", "og:url")).toBe("https://shop.example/products/p-000123");
    expect(metaContent(html, "property", "og:image")).toBe("https://img.example/p-000123/1.jpg");
    expect(metaContent(html, "property", "og:description")).toBe(metaContent(html, "name", "description"));
    // The card a shared link shows (Facebook's and X's presets), from the same data, the site from PUBLIC_URL.
    expect(metaContent(html, "property", "og:site_name")).toBe("shop.example");
    expect(metaContent(html, "property", "og:image:alt")).toBe("Side view"); // the first image's own alt text
    expect(metaContent(html, "name", "twitter:card")).toBe("summary_large_image");
    expect(metaContent(html, "name", "twitter:title")).toBe("Trail Runner 2");
    expect(metaContent(html, "name", "twitter:description")).toBe(metaContent(html, "name", "description"));
    expect(metaContent(html, "name", "twitter:image")).toBe("https://img.example/p-000123/1.jpg");
  });

  it("shows price and compare-at price with accessible labels and discount", () => {
    const html = renderProductPage(model());
    const price = tagText(html, "p", 'class="price"');
    expect(price).toMatch(/<span class="visually-hidden">Was<\/span>\s*<s class="price-was">\$159\.99<\/s>/);
    expect(price).toMatch(/<span class="visually-hidden">, now<\/span>\s*<span class="price-now[^"]*">\$129\.99<\/span>/);
    expect(price).toContain("Save 19%");
  });

  it("shows a single labelled price without a compare-at price", () => {
    const html = renderProductPage(model({ product: product({ compareAtPrice: undefined }) }));
    const price = tagText(html, "p", 'class="price"');
    expect(price).toContain('<span class="visually-hidden">Price:</span>');
    expect(price).toContain("$129.99");
    expect(price).not.toMatch(/<s[\s>]/);
    expect(price).not.toContain("Save");
  });

  it("formats EUR and JPY prices", () => {
    const eur = renderProductPage(model({ product: product({ price: { amount: 8950, currency: "EUR" }, compareAtPrice: undefined }) }));
    expect(tagText(eur, "p", 'class="price"')).toContain("€89.50");
    expect(jsonLd(eur).offers).toMatchObject({ price: "89.50", priceCurrency: "EUR" });

    const jpy = renderProductPage(
      model({ product: product({ price: { amount: 15000, currency: "JPY" }, compareAtPrice: { amount: 20000, currency: "JPY" } }) }),
    );
    const price = tagText(jpy, "p", 'class="price"');
    expect(price).toContain("¥15,000");
    expect(price).toContain("¥20,000");
    expect(price).not.toMatch(/¥[\d,]+\.\d/);
    expect(price).toContain("Save 25%");
    expect(jsonLd(jpy).offers).toMatchObject({ price: "15000", priceCurrency: "JPY" });
  });

  it("shows availability from inventory", () => {
    const text = (inv: Inventory) => tagText(renderProductPage(model({ inventory: { state: "ok", data: inv } })), "p", 'class="availability[^"]*"');
    expect(text(inventory())).toContain("In stock");
    expect(text(inventory({ status: "low_stock", available: 3 }))).toContain("Only 3 left");
    expect(text(inventory({ status: "out_of_stock", available: 0 }))).toContain("Out of stock");
    // A zero count is never sold as in stock, whatever the status says.
    expect(text(inventory({ status: "in_stock", available: 0 }))).toContain("Out of stock");
    expect(text(inventory())).toContain('<span class="visually-hidden">Availability: </span>');
  });

  it("never says in stock when inventory is unknown", () => {
    const html = renderProductPage(model({ inventory: { state: "unavailable" } }));
    expect(html).toContain(AVAILABILITY_UNKNOWN_TEXT);
    expect(html).toContain("Availability unknown — check again shortly");
    expect(html).not.toMatch(/in stock|only \d+ left|InStock|LimitedAvailability/i);
  });

  it("renders reviews: summary, top reviews, none and unavailable", () => {
    const ok = renderProductPage(model());
    const section = tagText(ok, "section", 'class="reviews"');
    expect(section).toContain("4.6 out of 5 stars");
    expect(section).toContain("213 reviews");
    expect(section).toContain("Great grip");
    expect(section).toContain("By Sam");
    expect(count(section, /<li class="review">/)).toBe(3);
    // The spaces between the stars, the rating and the count are part of the text, not layout.
    const summary = /<p>(<span class="stars"[\s\S]*?)<\/p>/.exec(section)?.[1] ?? "";
    expect(summary.replace(/<[^>]+>/g, "")).toBe("★★★★★ 4.6 out of 5 stars, 213 reviews");
    const firstReview = tagText(section, "li", 'class="review"').replace(/<[^>]+>/g, "|");
    expect(firstReview).toContain("|★★★★★| |5 out of 5 stars|");

    const none = renderProductPage(model({ reviews: { state: "none" } }));
    expect(none).toContain("No reviews yet");
    expect(jsonLd(none)).not.toHaveProperty("aggregateRating");

    const unavailable = renderProductPage(model({ reviews: { state: "unavailable" } }));
    expect(unavailable).toContain("Reviews are unavailable right now");
    expect(jsonLd(unavailable)).not.toHaveProperty("aggregateRating");
  });

  it("renders recommendations as links, and nothing when there are none", () => {
    const html = renderProductPage(model());
    const section = tagText(html, "section", 'class="recommendations"');
    expect(count(section, /<a href="\/products\/p-000\d+">/)).toBe(8);
    expect(section).toContain('<a href="/products/p-000456">');
    expect(section).toContain("Trail Sock 1");
    expect(section).toContain("$14.99");

    for (const state of ["none", "unavailable"] as const) {
      const page = renderProductPage(model({ recommendations: { state } }));
      expect(page).not.toContain('class="recommendations"');
      expect(page).not.toContain("/products/p-000456");
    }
  });

  it("builds the breadcrumb from the category", () => {
    const html = renderProductPage(model({ product: product({ category: ["Shoes", "Running", "Trail"] }) }));
    const nav = tagText(html, "nav", 'class="breadcrumb" aria-label="Breadcrumb"');
    const items = [...nav.matchAll(/<li[^>]*>([\s\S]*?)<\/li>/g)].map((m) => m[1]);
    expect(items).toEqual(['<a href="/">All products</a>', "Shoes", "Running", "Trail", "Trail Runner 2"]);
    expect(nav).toContain('<li aria-current="page">Trail Runner 2</li>');
  });

  it("loads the first image eagerly and the rest lazily, all with size and alt", () => {
    const html = renderProductPage(model({ recommendations: { state: "none" } }));
    const imgs = imgTags(html);
    expect(imgs).toHaveLength(4);
    expect(imgs[0]).not.toContain('loading="lazy"');
    expect(imgs[0]).toContain('fetchpriority="high"');
    expect(imgs[0]).toContain('alt="Side view"');
    for (const img of imgs.slice(1)) expect(img).toContain('loading="lazy"');
    for (const img of imgs) {
      expect(img).toMatch(/ width="\d+"/);
      expect(img).toMatch(/ height="\d+"/);
      expect(img).toMatch(/ alt="[^"]+"/);
    }
    // An image without alt text is described by the product title.
    expect(imgs[1]).toContain('alt="Trail Runner 2"');
  });

  it("preloads the gallery's main image (Link, for Early Hints), header-safe whatever the origin sent; none without one", () => {
    const html = renderProductPage(model());
    const mainSrc = /<img[^>]* src="([^"]+)"/.exec(html)?.[1];
    expect(preloadLink(shownImages(product())[0]?.url)).toBe(`<${mainSrc}>; rel=preload; as=image`);
    const link = (url: string) => preloadLink(shownImages(product({ images: [{ url, alt: "" }] }))[0]?.url);
    // Newlines are dropped by the URL parser; spaces, quotes and angle brackets percent-encoded; a host in Unicode as Punycode.
    expect(link('https://img.example/a b\r\nX-Evil: 1>"<.jpg')).toBe("<https://img.example/a%20bX-Evil:%201%3E%22%3C.jpg>; rel=preload; as=image");
    expect(link("https://bücher.example/ü.jpg")).toBe("<https://xn--bcher-kva.example/%C3%BC.jpg>; rel=preload; as=image");
    // An address the parser rejects, or one the page does not show (not http(s)), gives no hint.
    expect(link("https://exa mple.example/x.jpg")).toBeUndefined();
    expect(link("javascript:alert(1)")).toBeUndefined();
    expect(preloadLink(shownImages(product({ images: [] }))[0]?.url)).toBeUndefined();
  });

  it("renders without images, compare-at price, attributes or tags", () => {
    const html = renderProductPage(model({ product: product({ images: [], compareAtPrice: undefined, attributes: {}, tags: [], category: [] }) }));
    expect(html).not.toContain('class="gallery"');
    expect(html).not.toContain("<dl");
    expect(metaContent(html, "property", "og:image")).toBeUndefined();
    expect(metaContent(html, "name", "twitter:image")).toBeUndefined();
    expect(metaContent(html, "name", "twitter:card")).toBe("summary");
    expect(jsonLd(html)).not.toHaveProperty("image");
  });

  it("lists attributes as a definition list", () => {
    const html = renderProductPage(model());
    expect(html).toContain('<dl class="attributes">');
    expect(html).toContain("<dt>Color</dt><dd>Red</dd>");
    expect(html).toContain("<dt>Size</dt><dd>42</dd>");
  });

  it("renders whatever passes validation, however odd (as read back from L2), without throwing", () => {
    // Everything here passes the origin contract's schema, which is all that
    // data read from L2 is checked against (src/cache/l2/codec.ts).
    const valid = <R extends "product" | "inventory" | "reviews" | "recommendations">(resource: R, data: unknown) => {
      const checked = validateResource(resource, "p-000123", JSON.parse(JSON.stringify(data)));
      if (checked === null) throw new Error(`${resource} does not pass validation`);
      return checked;
    };
    const odd = [
      product({ price: { amount: Number.MAX_SAFE_INTEGER, currency: "USD" }, compareAtPrice: { amount: Number.MIN_SAFE_INTEGER, currency: "USD" } }),
      product({ price: { amount: -5, currency: "ZZZ" }, compareAtPrice: { amount: 0, currency: "JPY" } }),
      product({ title: "\uD800".repeat(500), description: "\u0001\uDFFF".repeat(10_000), brand: "", category: ["", "{{ x }}", "{% raw %}"] }),
      product({ attributes: JSON.parse('{"__proto__":"x","constructor":"y","toString":"z","":"empty"}'), tags: ["constructor", "__proto__"] }),
      product({ images: Array.from({ length: 20 }, () => ({ url: `https://${"<".repeat(1990)}`, alt: '"'.repeat(500) })) }),
      product({ version: Number.MAX_SAFE_INTEGER, updatedAt: "" }),
    ];
    for (const data of odd) {
      const html = renderProductPage(
        model({
          product: valid("product", data),
          inventory: { state: "ok", data: valid("inventory", inventory({ available: Number.MAX_SAFE_INTEGER, status: "low_stock" })) },
          reviews: { state: "ok", data: valid("reviews", reviews({ rating: 0, count: Number.MAX_SAFE_INTEGER, top: [] })) },
          recommendations: {
            state: "ok",
            data: valid("recommendations", {
              ...recommendations(8),
              items: recommendations(8).items.map((item) => ({ ...item, price: { amount: Number.MIN_SAFE_INTEGER, currency: "XXX" }, image: "" })),
            }),
          },
        }),
      );
      expect(html).toContain("</html>");
    }
  });

  it("shows no control, noncharacter or bidirectional override the origin's text carried: validation takes them out", () => {
    const unshowable = "\u0000\u0001\u001f\u007f\u0085\u202e\u2066\ufffe";
    const checked = validateResource(
      "product",
      "p-000123",
      product({ title: `Trail${unshowable} Runner`, description: "Line one\nLine two\tend\u0007", attributes: { [`Co${unshowable}lor`]: `Red${unshowable}` } }),
    );
    expect(checked).toMatchObject({ title: "Trail Runner", description: "Line one\nLine two\tend", attributes: { Color: "Red" } });
    const html = renderProductPage(model({ product: checked! }));
    expect(html).not.toMatch(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\ufffe\uffff]/);
    expect(tagText(html, "h1")).toBe("Trail Runner");
  });

  it("keeps a typical product page under 30 KB", () => {
    const html = renderProductPage(model());
    expect(new TextEncoder().encode(html).length).toBeLessThan(30 * 1024);
  });
});

describe("home page", () => {
  it("lists product links, escaping titles and falling back to the id", () => {
    const html = renderHomePage({
      products: [
        { id: "p-000001", title: "Trail Runner 2" },
        { id: "p-000002", title: null },
        { id: "p-000003", title: HOSTILE },
      ],
    });
    expect(count(html, /<h1[\s>]/)).toBe(1);
    expect(html).toContain('<a href="/products/p-000001">Trail Runner 2</a>');
    expect(html).toContain('<a href="/products/p-000002">p-000002</a>');
    expect(html).toContain(`<a href="/products/p-000003">${HOSTILE_ESCAPED}</a>`);
    expect(html).not.toContain("<script");
  });

  it("says so when there are no products", () => {
    expect(renderHomePage({ products: [] })).toContain("No products to show yet.");
  });
});

describe("error pages", () => {
  it("404: page not found, or the product when the caller says so, with a link home, not indexed", () => {
    const page = renderErrorPage({ status: 404, message: "There is no page at this address." });
    expect(tagText(page, "h1")).toBe("Page not found");
    expect(tagText(page, "title")).toBe("Page not found");
    const html = renderErrorPage({ status: 404, message: "We could not find that product.", heading: "Product not found" });
    expect(tagText(html, "h1")).toBe("Product not found");
    expect(count(html, /<h1[\s>]/)).toBe(1);
    expect(html).toContain('<a href="/">Back to the home page</a>');
    expect(metaContent(html, "name", "robots")).toBe("noindex");
  });

  it("503: asks to retry in N seconds", () => {
    const html = renderErrorPage({ status: 503, message: "", retryAfterSeconds: 30 });
    expect(html).toContain("This page is temporarily unavailable, please retry in 30 seconds");
    expect(count(html, /<h1[\s>]/)).toBe(1);
    expect(renderErrorPage({ status: 503, message: "", retryAfterSeconds: 1 })).toContain("retry in 1 second.");
    expect(renderErrorPage({ status: 503, message: "" })).toContain("please retry in a few seconds");
  });

  it("generic error page shows the message, escaped", () => {
    const html = renderErrorPage({ status: 400, message: `Invalid product id ${HOSTILE}` });
    expect(tagText(html, "h1")).toBe("Bad request");
    expect(html).toContain(`Invalid product id ${HOSTILE_ESCAPED}`);
    expect(html).not.toContain("<script>alert");
    expect(count(html, /<h1[\s>]/)).toBe(1);
  });
});

describe("templates", () => {
  // Compiled with the worker (TSX in templates/, hono/jsx): nothing to load or
  // parse at run time, and no promise to await: a render is one synchronous call.
  it("render every page synchronously, as a whole document", () => {
    const pages = [
      renderProductPage(model()),
      renderProductPage(model({ inventory: { state: "unavailable" }, reviews: { state: "none" }, recommendations: { state: "unavailable" } })),
      renderProductPage(
        model({ reviews: { state: "unavailable" }, recommendations: { state: "none" }, product: product({ images: [], compareAtPrice: undefined }) }),
      ),
      renderHomePage({ products: [{ id: "p-1", title: "x" }] }),
      renderHomePage({ products: [] }),
      renderErrorPage({ status: 404, message: "" }),
      renderErrorPage({ status: 503, message: "", retryAfterSeconds: 5 }),
      renderErrorPage({ status: 400, message: "bad" }),
    ];
    for (const page of pages) {
      expect(typeof page).toBe("string");
      expect(page.startsWith('<!doctype html><html lang="en"><head>')).toBe(true);
      expect(page.endsWith("</main></body></html>")).toBe(true);
    }
  });
});
