// Turns the render models into the plain objects the templates read. Every
// decision (formatting, fallbacks, URLs, what to omit) is made here, in typed
// code; the templates only lay out what they are given. Every field is always
// present (null when absent) because the engine runs with strictVariables.
import type { ErrorPageModel, HomePageModel, ProductPageModel } from "./model";
import { availability, discountPercent, formatMoney, ratingStars, ratingText, reviewCountText, truncateText, type Availability } from "./format";
import { structuredDataFor } from "./jsonld";
import { isWebUrl, productHref } from "./urls";

/** Meta description length that search engines show without cutting. */
const META_DESCRIPTION_MAX = 160;

// Images come without dimensions; declared ones reserve the space (no layout
// shift) and CSS scales them keeping the square frame.
const MAIN_IMAGE_SIZE = 800;
const RECOMMENDATION_IMAGE_SIZE = 240;

interface MetaView {
  title: string;
  description: string | null;
  canonical: string | null;
  /** "noindex" on error pages. */
  robots: string | null;
  /**
   * Open Graph and Twitter card tags (a shared link shows a card). The site
   * name is PUBLIC_URL's host (the page URL is built from it, never from the
   * request); the image's alt text is its own, or the product title.
   */
  og: { title: string; description: string; image: { url: string; alt: string } | null; url: string; type: string; siteName: string } | null;
}

interface ImageView {
  url: string;
  alt: string;
  width: number;
  height: number;
  eager: boolean;
}

interface ReviewView {
  author: string;
  title: string;
  body: string;
  ratingText: string;
  stars: string;
}

export interface ProductView {
  meta: MetaView;
  product: { id: string; title: string; brand: string; description: string };
  breadcrumb: string[];
  price: { now: string; was: string | null; discountPercent: number | null };
  availability: Availability;
  images: ImageView[];
  attributes: { name: string; value: string }[];
  reviews: {
    state: "ok" | "none" | "unavailable";
    ratingText: string | null;
    stars: string | null;
    countText: string | null;
    top: ReviewView[];
  };
  recommendations: { href: string; title: string; price: string; image: ImageView | null }[];
  structuredData: Record<string, unknown>;
}

export interface HomeView {
  meta: MetaView;
  products: { href: string; title: string }[];
}

export interface ErrorView {
  meta: MetaView;
  status: number;
  heading: string;
  message: string | null;
  retryText: string | null;
}

function attributeName(key: string): string {
  const spaced = key.replace(/[_-]+/g, " ").trim();
  return spaced.charAt(0).toUpperCase() + spaced.slice(1);
}

export function productView(model: ProductPageModel): ProductView {
  const { product } = model;
  const images: ImageView[] = product.images
    .filter((image) => isWebUrl(image.url))
    .map((image, index) => ({
      url: image.url,
      alt: image.alt.trim() || product.title,
      width: MAIN_IMAGE_SIZE,
      height: MAIN_IMAGE_SIZE,
      // Only the first image is above the fold.
      eager: index === 0,
    }));

  const description = product.description.trim();
  const metaDescription = truncateText(description || `${product.title} by ${product.brand}`, META_DESCRIPTION_MAX);
  const percent = discountPercent(product.price, product.compareAtPrice);

  const reviews: ProductView["reviews"] =
    model.reviews.state === "ok"
      ? {
          state: "ok",
          ratingText: ratingText(model.reviews.data.rating),
          stars: ratingStars(model.reviews.data.rating),
          countText: reviewCountText(model.reviews.data.count),
          top: model.reviews.data.top.slice(0, 3).map((review) => ({
            author: review.author,
            title: review.title,
            body: review.body,
            ratingText: ratingText(review.rating),
            stars: ratingStars(review.rating),
          })),
        }
      : { state: model.reviews.state, ratingText: null, stars: null, countText: null, top: [] };

  const recommendations: ProductView["recommendations"] =
    model.recommendations.state === "ok"
      ? model.recommendations.data.items.slice(0, 8).map((item) => ({
          href: productHref(item.id),
          title: item.title,
          price: formatMoney(item.price),
          image: isWebUrl(item.image)
            ? {
                url: item.image,
                // The title is right next to the image as link text: an empty
                // alt keeps screen readers from reading it twice.
                alt: "",
                width: RECOMMENDATION_IMAGE_SIZE,
                height: RECOMMENDATION_IMAGE_SIZE,
                eager: false,
              }
            : null,
        }))
      : [];

  return {
    meta: {
      title: product.brand ? `${product.title} · ${product.brand}` : product.title,
      description: metaDescription,
      canonical: model.pageUrl,
      robots: null,
      og: {
        title: product.title,
        description: metaDescription,
        image: images[0] ? { url: images[0].url, alt: images[0].alt } : null,
        url: model.pageUrl,
        type: "product",
        siteName: new URL(model.pageUrl).host,
      },
    },
    product: { id: product.id, title: product.title, brand: product.brand, description },
    breadcrumb: product.category.filter((name) => name.trim() !== ""),
    price: {
      now: formatMoney(product.price),
      was: percent !== null && product.compareAtPrice ? formatMoney(product.compareAtPrice) : null,
      discountPercent: percent,
    },
    availability: availability(model.inventory),
    images,
    attributes: Object.entries(product.attributes).map(([key, value]) => ({ name: attributeName(key), value })),
    reviews,
    recommendations,
    structuredData: structuredDataFor(model),
  };
}

export function homeView(model: HomePageModel): HomeView {
  return {
    meta: { title: "All products", description: "Browse all products.", canonical: null, robots: null, og: null },
    products: model.products.map((entry) => ({
      href: productHref(entry.id),
      title: entry.title ?? entry.id,
    })),
  };
}

const STATUS_HEADINGS: Record<number, string> = {
  400: "Bad request",
  403: "Forbidden",
  404: "Product not found",
  405: "Method not allowed",
  429: "Too many requests",
  503: "Temporarily unavailable",
};

function retryText(seconds: number | undefined): string {
  if (seconds === undefined || !Number.isFinite(seconds) || seconds <= 0) {
    return "This page is temporarily unavailable, please retry in a few seconds.";
  }
  const n = Math.ceil(seconds);
  return `This page is temporarily unavailable, please retry in ${n} ${n === 1 ? "second" : "seconds"}.`;
}

export function errorView(model: ErrorPageModel): ErrorView {
  const heading = STATUS_HEADINGS[model.status] ?? "Something went wrong";
  const message = model.message.trim();
  return {
    meta: { title: heading, description: null, canonical: null, robots: "noindex", og: null },
    status: model.status,
    heading,
    // The heading already says it: do not print the same sentence twice.
    message: message && message !== heading ? message : null,
    retryText: model.status === 503 ? retryText(model.retryAfterSeconds) : null,
  };
}
