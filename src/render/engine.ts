// The Liquid engine, set up for Workers: no filesystem (templates are bundled
// as strings and served from an in-memory map), no eval, escaping on by
// default, and every template parsed once per isolate.
import { Liquid, LookupType, type Template } from "liquidjs";
import { jsonForScript } from "./jsonld";

import layoutSource from "../../templates/layout.liquid";
import productSource from "../../templates/product.liquid";
import homeSource from "../../templates/home.liquid";
import notFoundSource from "../../templates/404.liquid";
import unavailableSource from "../../templates/503.liquid";
import errorSource from "../../templates/error.liquid";
import statusSource from "../../templates/status.liquid";
import breadcrumbSource from "../../templates/partials/breadcrumb.liquid";
import gallerySource from "../../templates/partials/gallery.liquid";
import priceSource from "../../templates/partials/price.liquid";
import availabilitySource from "../../templates/partials/availability.liquid";
import reviewsSource from "../../templates/partials/reviews.liquid";
import recommendationsSource from "../../templates/partials/recommendations.liquid";

/** Templates rendered directly (the others are reached through `layout` and `render` tags). */
export type PageTemplate = "product.liquid" | "home.liquid" | "404.liquid" | "503.liquid" | "error.liquid" | "status.liquid";

const PAGES: Record<PageTemplate, string> = {
  "product.liquid": productSource,
  "home.liquid": homeSource,
  "404.liquid": notFoundSource,
  "503.liquid": unavailableSource,
  "error.liquid": errorSource,
  "status.liquid": statusSource,
};

const LAYOUTS: Record<string, string> = {
  "layout.liquid": layoutSource,
};

const PARTIALS: Record<string, string> = {
  "partials/breadcrumb.liquid": breadcrumbSource,
  "partials/gallery.liquid": gallerySource,
  "partials/price.liquid": priceSource,
  "partials/availability.liquid": availabilitySource,
  "partials/reviews.liquid": reviewsSource,
  "partials/recommendations.liquid": recommendationsSource,
};

// DoS limits. Our templates are a few KB and a page is tens of KB, so these
// are orders of magnitude above normal use and only stop a runaway render
// (say, a huge untrusted text repeated by a loop). Note that `renderLimit` is
// wall time, and in Workers the clock does not advance during synchronous
// work, so there the CPU limit of the platform is the real bound.
const PARSE_LIMIT_CHARS = 1_000_000;
const RENDER_LIMIT_MS = 1_000;
// Counted in characters of strings the filters (including the automatic
// escape of every output) produce in one render.
const MEMORY_LIMIT = 20_000_000;

/**
 * A parsed-template cache that never evicts (the set of templates is fixed and
 * small) and counts its fills: liquidjs fills it exactly when it parses a
 * file, which makes "parsed once per isolate" checkable.
 */
class ParsedTemplates {
  private readonly entries = new Map<string, Template[] | Promise<Template[]>>();
  parses = 0;
  read(key: string): Template[] | Promise<Template[]> | undefined {
    return this.entries.get(key);
  }
  write(key: string, value: Template[] | Promise<Template[]>): void {
    this.parses++;
    this.entries.set(key, value);
  }
  remove(key: string): void {
    this.entries.delete(key);
  }
}

interface Engine {
  liquid: Liquid;
  cache: ParsedTemplates;
  pages: Map<PageTemplate, Template[]>;
}

let engine: Engine | undefined;

function createEngine(): Engine {
  const cache = new ParsedTemplates();
  const liquid = new Liquid({
    templates: { ...PAGES, ...LAYOUTS, ...PARTIALS },
    cache,
    outputEscape: "escape",
    strictFilters: true,
    // Templates read view objects whose fields are always present: a typo in
    // a template fails the tests instead of printing nothing.
    strictVariables: true,
    lenientIf: true,
    ownPropertyOnly: true,
    trimTagRight: true,
    greedy: false,
    locale: "en-US",
    parseLimit: PARSE_LIMIT_CHARS,
    renderLimit: RENDER_LIMIT_MS,
    memoryLimit: MEMORY_LIMIT,
  });

  // The one way to print unescaped: the value is serialised here, with every
  // character that could close or confuse a <script> element \u-escaped.
  liquid.registerFilter("json_script", { handler: (value: unknown) => jsonForScript(value), raw: true });

  // Parse everything up front, on first use: a broken template fails the
  // first render rather than a rare page later, and no render ever parses.
  const pages = new Map<PageTemplate, Template[]>();
  for (const name of Object.keys(PAGES) as PageTemplate[]) {
    pages.set(name, liquid.parseFileSync(name, LookupType.Root));
  }
  for (const name of Object.keys(LAYOUTS)) liquid.parseFileSync(name, LookupType.Layouts);
  for (const name of Object.keys(PARTIALS)) liquid.parseFileSync(name, LookupType.Partials);
  return { liquid, cache, pages };
}

function getEngine(): Engine {
  engine ??= createEngine();
  return engine;
}

/** Renders one page template with the given view; synchronous. */
export function renderTemplate(name: PageTemplate, view: object): string {
  const { liquid, pages } = getEngine();
  const templates = pages.get(name);
  if (!templates) throw new Error(`unknown template ${name}`);
  return String(liquid.renderSync(templates, view));
}

/** How many template files this isolate has parsed (for tests: it must stay constant). */
export function templatesParsedCount(): number {
  return engine?.cache.parses ?? 0;
}

/** How many template files there are. */
export function templateCount(): number {
  return Object.keys(PAGES).length + Object.keys(LAYOUTS).length + Object.keys(PARTIALS).length;
}
