// A product page as the benchmarks read it: fetched whole, and its visible
// price and title picked out (templates/partials/price.tsx, templates/product.tsx).

export interface Page {
  status: number;
  contentType: string;
  cacheStatus: string;
  body: string;
}

export async function getPage(url: string, timeoutMs = 5000): Promise<Page> {
  const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), headers: { accept: "text/html" } });
  return {
    status: response.status,
    contentType: response.headers.get("content-type") ?? "",
    cacheStatus: response.headers.get("cache-status") ?? "",
    body: await response.text(),
  };
}

/**
 * A price to change a product to that its page cannot be showing already, in
 * minor units and as the page shows it: $123.45 (no demo-origin price ends in
 * 45: they all end in 99), or $123.46 where it somehow is.
 */
export function priceOtherThan(shown: string | null): { minor: number; shown: string } {
  const minor = shown === "$123.45" ? 12_346 : 12_345;
  return { minor, shown: `$${Math.floor(minor / 100)}.${String(minor % 100).padStart(2, "0")}` };
}

/** The visible price of a product page (templates/partials/price.tsx), e.g. "$123.45". */
export function priceNow(body: string): string | null {
  return /class="price-now[^"]*">([^<]+)</.exec(body)?.[1]?.trim() ?? null;
}

/** The page's <h1>: the product's title as shown. */
export function title(body: string): string | null {
  return /<h1[^>]*>([\s\S]*?)<\/h1>/.exec(body)?.[1]?.trim() ?? null;
}
