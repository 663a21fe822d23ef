// The render module: models in, HTML out. Rendering is synchronous (templates
// are parsed once per isolate, see ./engine), so callers can time it and no
// request waits on anything but CPU.
import type { ErrorPageModel, HomePageModel, ProductPageModel } from "./model";
import { renderTemplate, type PageTemplate } from "./engine";
import { errorView, homeView, productView } from "./view";
import type { StatusModel } from "../observability/status";
import { statusView } from "../observability/statusView";

export function renderProductPage(model: ProductPageModel): string {
  return renderTemplate("product.liquid", productView(model));
}

export function renderHomePage(model: HomePageModel): string {
  return renderTemplate("home.liquid", homeView(model));
}

/** 404 and 503 have their own pages; any other status gets the generic one. */
export function renderErrorPage(model: ErrorPageModel): string {
  const template: PageTemplate = model.status === 404 ? "404.liquid" : model.status === 503 ? "503.liquid" : "error.liquid";
  return renderTemplate(template, errorView(model));
}

/** The operators' status page of one isolate (GET /__status). */
export function renderStatusPage(model: StatusModel): string {
  return renderTemplate("status.liquid", statusView(model));
}

export { templatesParsedCount, templateCount } from "./engine";
export { jsonLdFor, jsonForScript } from "./jsonld";
export {
  formatMoney,
  decimalAmount,
  minorDigits,
  discountPercent,
  truncateText,
  AVAILABILITY_UNKNOWN_TEXT,
} from "./format";
