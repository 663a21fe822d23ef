// URLs the page writes. Escaping keeps untrusted URLs inside their attribute,
// but does not stop a `javascript:` or `data:` URL from doing harm there.

/** Only absolute http(s) URLs from the origin are used as image sources. */
export function isWebUrl(url: string): boolean {
  return /^https?:\/\//i.test(url);
}

/** Link to a product page; the id is encoded although validated ids never need it. */
export function productHref(id: string): string {
  return `/products/${encodeURIComponent(id)}`;
}
