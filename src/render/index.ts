// The render module: models in, HTML out. Each model becomes its typed view (./view.ts), and the view the page's HTML through
// its template: a TSX component in templates/, compiled with the worker (hono/jsx, escaping every text and attribute), so
// nothing is parsed at run time. Rendering is synchronous, so callers can time it and no request waits on anything but CPU.
import type { JSX } from "hono/jsx/jsx-runtime";
import type { ErrorPageModel, HomePageModel, ProductPageModel } from "./model";
import { errorView, homeView, productView } from "./view";
import type { StatusModel } from "../observability/statusModel";
import { statusView } from "./statusView";
import { NotFoundPage } from "../../templates/404";
import { UnavailablePage } from "../../templates/503";
import { ErrorPage } from "../../templates/error";
import { HomePage } from "../../templates/home";
import { PRODUCT_PAGE, ProductPage } from "../../templates/product";
import type { PageResource } from "../origin/resources";
import { StatusPage } from "../../templates/status";

/**
 * The page's HTML. Every template is a synchronous component, whose element stringifies to the page itself;
 * an asynchronous one (a promise) would be a bug in a template, and fails here like any other render error.
 */
function html(page: JSX.Element): string {
  const text: unknown = page instanceof Promise ? page : page.toString();
  if (typeof text !== "string") throw new Error("a template rendered asynchronously: templates must be synchronous");
  return text;
}

export function renderProductPage(model: ProductPageModel): string {
  return html(ProductPage(productView(model)));
}

/** A piece of the product page: the resources whose sections it shows, and its HTML from a model where those are final. */
export interface PagePiece {
  shows: readonly PageResource[];
  render(model: ProductPageModel): string;
}

/**
 * The product page in document order (templates/product.tsx), for a page streamed as its sections
 * arrive (http/streamedPage.ts): joined, the pieces are renderProductPage's HTML for the same model.
 */
export const PRODUCT_PAGE_PIECES: readonly PagePiece[] = PRODUCT_PAGE.map((piece) => ({
  shows: piece.shows,
  render: (model: ProductPageModel) => html(piece.render(productView(model))),
}));

export function renderHomePage(model: HomePageModel): string {
  return html(HomePage(homeView(model)));
}

/** 404 and 503 have their own pages; any other status gets the generic one. */
export function renderErrorPage(model: ErrorPageModel): string {
  const view = errorView(model);
  return html(model.status === 404 ? NotFoundPage(view) : model.status === 503 ? UnavailablePage(view) : ErrorPage(view));
}

/** The operators' status page of one isolate (GET /__status). */
export function renderStatusPage(model: StatusModel): string {
  return html(StatusPage(statusView(model)));
}
