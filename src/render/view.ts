// Turns the render models into the typed views the templates (templates/*.tsx) take as their props. Every decision
// (formatting, fallbacks, URLs, what to omit) is made here, in typed code; the templates only lay out what they are
// given. A field the templates may leave out is null, never missing, so that each template says what it does without it.
import type { PageResource } from "../origin/resources";
import type { ErrorPageModel, HomePageModel, ProductPageModel, Section } from "./model";
import { availability, discountPercent, formatMoney, ratingStars, ratingText, reviewCountText, truncateText, type Availability } from "./format";
import { structuredDataFor } from "./jsonld";
import { isWebUrl, productHref } from "./urls";
import type { Recommendations, ReviewsSummary } from "../origin/types";

export interface MetaView {
  title: string;
  description: string | null;
  canonical: string | null;
  /** "noindex" on error pages. */
  robots: string | null;
  /**
   * Open Graph and Twitter card tags (a shared link shows a card). The site name is PUBLIC_URL's host (the
   * page URL is built from it, never from the request); the image's alt text is its own, or the product title.
   */
  og: { title: string; description: string; image: { url: string; alt: string } | null; url: string; type: string; siteName: string } | null;
}

/** An image the page shows: an http(s) URL (urls.ts) and its alt text; templates/layout.tsx gives it its box. */
interface ImageView {
  url: string;
  alt: string;
}

/** What the product's own data shows: the breadcrumb, the gallery and the summary beside it. */
export interface ProductSummaryView {
  title: string;
  brand: string;
  description: string;
  /** The category path, shown between "All products" and the title. */
  breadcrumb: string[];
  /** On sale: what it was, and the whole-percent discount (format.ts says when there is one). */
  price: { now: string; sale: { was: string; percentOff: number } | null };
  /** The first image is above the fold (loaded first), the others are thumbnails; null when there is no usable image. */
  gallery: { main: ImageView; thumbs: ImageView[] } | null;
  attributes: { name: string; value: string }[];
}

interface ReviewView {
  author: string;
  title: string;
  body: string;
  ratingText: string;
  stars: string;
}

type ReviewsView = { state: "ok"; ratingText: string; stars: string; countText: string; top: ReviewView[] } | { state: "none" } | { state: "unavailable" };

interface RecommendationView {
  href: string;
  title: string;
  price: string;
  image: ImageView | null;
}

/**
 * The view of each resource's section of the product page, by resource. Every resource of the page (PAGE_RESOURCES)
 * must have one: a resource added to the registry without an entry here fails `tsc` at ProductSections.
 */
export interface SectionViews {
  product: ProductSummaryView;
  inventory: Availability;
  reviews: ReviewsView;
  /** Empty when there are none, or none could be had: the section is then left out. */
  recommendations: RecommendationView[];
}

/** One section per resource in `R`, each of its own view type; `R` may only name resources that have one. */
export type SectionsFor<R extends keyof SectionViews> = { [K in R]: SectionViews[K] };

/** The sections of the product page: one per resource of the page, as the registry lists them. */
export type ProductSections = SectionsFor<PageResource>;

export interface ProductView {
  meta: MetaView;
  /** The schema.org Product, as data: templates/partials/jsonLd.tsx serialises it for its <script>. */
  structuredData: Record<string, unknown>;
  sections: ProductSections;
}

export type HomeView = ReturnType<typeof homeView>;
export type ErrorView = ReturnType<typeof errorView>;

function attributeName(key: string): string {
  const spaced = key.replace(/[_-]+/g, " ").trim();
  return spaced.charAt(0).toUpperCase() + spaced.slice(1);
}

function reviewsView(reviews: Section<ReviewsSummary>): ReviewsView {
  if (reviews.state !== "ok") return { state: reviews.state };
  const { rating, count, top } = reviews.data;
  return {
    state: "ok",
    ratingText: ratingText(rating),
    stars: ratingStars(rating),
    countText: reviewCountText(count),
    // At most 3, as the contract's schema bounds them (origin/resources.ts), whether fetched or read back from L2.
    top: top.map((review) => ({
      author: review.author,
      title: review.title,
      body: review.body,
      ratingText: ratingText(review.rating),
      stars: ratingStars(review.rating),
    })),
  };
}

function recommendationsView(recommendations: Section<Recommendations>): RecommendationView[] {
  if (recommendations.state !== "ok") return [];
  // At most 8, bounded by the schema as the reviews are.
  return recommendations.data.items.map((item) => ({
    href: productHref(item.id),
    title: item.title,
    price: formatMoney(item.price),
    // The title is right next to the image as link text: an empty alt keeps screen readers from reading it twice.
    image: isWebUrl(item.image) ? { url: item.image, alt: "" } : null,
  }));
}

/** The images a product page shows, in order (those with a web address): the first is the gallery's main one. */
export function shownImages(product: ProductPageModel["product"]): ImageView[] {
  return product.images.filter((image) => isWebUrl(image.url)).map((image) => ({ url: image.url, alt: image.alt.trim() || product.title }));
}

export function productView(model: ProductPageModel): ProductView {
  const { product } = model;
  const [main, ...thumbs] = shownImages(product);

  const description = product.description.trim();
  // 160 characters: what search engines show of a meta description without cutting it (their convention).
  const metaDescription = truncateText(description || `${product.title} by ${product.brand}`, 160);
  const percent = discountPercent(product.price, product.compareAtPrice);

  return {
    meta: {
      title: product.brand ? `${product.title} · ${product.brand}` : product.title,
      description: metaDescription,
      canonical: model.pageUrl,
      robots: null,
      og: {
        title: product.title,
        description: metaDescription,
        image: main ?? null,
        url: model.pageUrl,
        type: "product",
        siteName: new URL(model.pageUrl).host,
      },
    },
    structuredData: structuredDataFor(model),
    sections: {
      product: {
        title: product.title,
        brand: product.brand,
        description,
        breadcrumb: product.category.filter((name) => name.trim() !== ""),
        price: {
          now: formatMoney(product.price),
          sale: percent !== null && product.compareAtPrice ? { was: formatMoney(product.compareAtPrice), percentOff: percent } : null,
        },
        gallery: main ? { main, thumbs } : null,
        attributes: Object.entries(product.attributes).map(([key, value]) => ({ name: attributeName(key), value })),
      },
      inventory: availability(model.inventory),
      reviews: reviewsView(model.reviews),
      recommendations: recommendationsView(model.recommendations),
    },
  };
}

export function homeView(model: HomePageModel) {
  return {
    meta: { title: "All products", description: "Browse all products.", canonical: null, robots: null, og: null } satisfies MetaView,
    products: model.products.map((entry) => ({
      href: productHref(entry.id),
      title: entry.title ?? entry.id,
    })),
  };
}

const STATUS_HEADINGS: Record<number, string> = {
  400: "Bad request",
  404: "Page not found",
  405: "Method not allowed",
  429: "Too many requests",
  503: "Temporarily unavailable",
};

/** `seconds`: whole, as Retry-After gives them. */
function retryText(seconds: number | undefined): string {
  const when = seconds === undefined ? "a few seconds" : `${seconds} ${seconds === 1 ? "second" : "seconds"}`;
  return `This page is temporarily unavailable, please retry in ${when}.`;
}

export function errorView(model: ErrorPageModel) {
  const heading = model.heading ?? STATUS_HEADINGS[model.status] ?? "Something went wrong";
  const message = model.message.trim();
  return {
    meta: { title: heading, description: null, canonical: null, robots: "noindex", og: null } satisfies MetaView,
    status: model.status,
    heading,
    // The heading already says it: do not print the same sentence twice.
    message: message && message !== heading ? message : null,
    retryText: model.status === 503 || model.status === 429 ? retryText(model.retryAfterSeconds) : null,
  };
}
