// The frame of every page: the document head (title, description, canonical
// and the cards a shared link shows) and the site header. Pages put their own
// head elements (the product's JSON-LD, the status page's styles) in `head`.
import { html, raw } from "hono/html";
import type { Child } from "hono/jsx";
import type { MetaView } from "../src/render/view";

// JSX has no doctype. It and the CSS below are the layout's only raw text: constants.
const DOCTYPE = raw("<!doctype html>");

// Inline, so that a page is one request with nothing to block its render.
// `overflow-wrap:anywhere` on body: untrusted text (titles, reviews) may hold
// words longer than a phone is wide; they break rather than widen the page.
// The site header's padding lines its text up with main's content (72rem
// wide, 1rem or 2rem side padding).
const PAGE_CSS = raw(`
*,*::before,*::after{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;font:1rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1b1b;background:#fff;overflow-wrap:anywhere}
a{color:#0b4fa8}
a:hover{color:#083a7c}
a:focus-visible{outline:3px solid #0b4fa8;outline-offset:2px}
img{max-width:100%;height:auto;display:block}
.skip{position:absolute;left:-999px;top:0;background:#fff;padding:.5rem 1rem}
.skip:focus{left:.5rem;top:.5rem;z-index:1}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);clip-path:inset(50%);white-space:nowrap}
.site-header{background:#1b1b1b;padding:.75rem max(1rem,calc(50% - 35rem))}
.site-header a{color:#fff;font-weight:700;text-decoration:none}
.site-header a:focus-visible{outline-color:#fff}
main{max-width:72rem;margin:0 auto;padding:1rem}
h1{font-size:1.75rem;line-height:1.2;margin:.25rem 0 .5rem}
h2{font-size:1.3rem;margin:2rem 0 .75rem}
h3{font-size:1.05rem;margin:0 0 .25rem}
.muted,.brand{color:#4d4d4d}
.breadcrumb ol{list-style:none;margin:0 0 1rem;padding:0;display:flex;flex-wrap:wrap;gap:.25rem;font-size:.9rem}
.breadcrumb li+li::before{content:"/";margin-right:.25rem;color:#4d4d4d}
.product{display:grid;gap:1.5rem}
.gallery{margin:0}
.gallery img{width:100%;aspect-ratio:1;object-fit:contain;background:#f4f4f4}
.thumbs{list-style:none;margin:.5rem 0 0;padding:0;display:grid;grid-template-columns:repeat(4,1fr);gap:.5rem}
.price{font-size:1.5rem;margin:.5rem 0;display:flex;flex-wrap:wrap;align-items:baseline;gap:.5rem}
.price-was{color:#4d4d4d;font-size:1.1rem}
.price-now{font-weight:700}
.price-sale{color:#a4161a}
.discount{font-size:.9rem;font-weight:700;color:#fff;background:#a4161a;padding:.1rem .5rem;border-radius:.25rem}
.availability{font-weight:600;margin:.5rem 0}
.availability--in_stock{color:#17653a}
.availability--low_stock{color:#8a4500}
.availability--out_of_stock{color:#a4161a}
.availability--unknown{color:#4d4d4d}
.description{white-space:pre-line}
.attributes{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}
.attributes dt{font-weight:600}
.attributes dd{margin:0}
.stars{color:#8a4500;letter-spacing:.1em}
.reviews ul,.recommendations ul,.product-list{list-style:none;padding:0;margin:0}
.review{border-top:1px solid #c4c4c4;padding:1rem 0}
.review p{margin:.25rem 0;white-space:pre-line}
.recommendations ul{display:grid;grid-template-columns:repeat(2,1fr);gap:1rem}
.recommendations a{display:block;text-decoration:none}
.recommendations a span{text-decoration:underline}
.recommendations img{width:100%;aspect-ratio:1;object-fit:contain;background:#f4f4f4;margin-bottom:.5rem}
.recommendations p{margin:.25rem 0 0}
.product-list li{padding:.5rem 0;border-bottom:1px solid #c4c4c4}
@media (min-width:48rem){
main{padding:1.5rem 2rem}
.site-header{padding:.75rem max(2rem,calc(50% - 34rem))}
h1{font-size:2.25rem}
.product{grid-template-columns:1fr 1fr;gap:2.5rem}
.recommendations ul{grid-template-columns:repeat(4,1fr)}
}
`);

/**
 * The width and height attributes of every product image: a square, as the
 * CSS above frames it (aspect-ratio:1, its width from the grid), so that its
 * space is reserved before it loads (no layout shift). Images come without
 * dimensions, and the CSS sets each one's width: one size serves them all.
 */
export const IMAGE_SIZE = 800;

/**
 * The document head's fixed tags: a hono/html fragment, escaped as JSX is
 * (every value through Hono's escapeToBuffer), because hono/jsx gives
 * <title>, <meta> and <link> the special handling of document metadata, which
 * made them a third of a product page's render (bench: 17 such tags). Written
 * as JSX serialises them, so that the page stays byte for byte the same.
 */
function headTags({ title, description, robots, canonical, og }: MetaView) {
  return html`<meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/><link rel="icon" href="data:,"/><title>${title}</title>${
    description ? html`<meta name="description" content="${description}"/>` : null
  }${robots ? html`<meta name="robots" content="${robots}"/>` : null}${canonical ? html`<link rel="canonical" href="${canonical}"/>` : null}${og ? openGraphTags(og) : null}`;
}

/** The cards a shared link shows (Open Graph, Twitter). */
function openGraphTags(og: NonNullable<MetaView["og"]>) {
  const card = og.image
    ? html`<meta property="og:image" content="${og.image.url}"/><meta property="og:image:alt" content="${og.image.alt}"/><meta name="twitter:card" content="summary_large_image"/><meta name="twitter:image" content="${og.image.url}"/><meta name="twitter:image:alt" content="${og.image.alt}"/>`
    : html`<meta name="twitter:card" content="summary"/>`;
  return html`<meta property="og:type" content="${og.type}"/><meta property="og:site_name" content="${og.siteName}"/><meta property="og:title" content="${og.title}"/><meta property="og:description" content="${og.description}"/><meta property="og:url" content="${og.url}"/>${card}<meta name="twitter:title" content="${og.title}"/><meta name="twitter:description" content="${og.description}"/>`;
}

/** The frame's start, up to the page's own content: what a streamed page sends first (templates/product.tsx). */
export function frameStart({ meta, head }: { meta: MetaView; head?: Child }) {
  return html`${DOCTYPE}<html lang="en"><head>${headTags(meta)}${head}<style>${PAGE_CSS}</style></head><body><a class="skip" href="#main">Skip to content</a><header class="site-header"><a href="/">Shop home</a></header><main id="main">`;
}

/** The frame's end, after the page's own content. */
export const FRAME_END = raw("</main></body></html>");

/**
 * The frame of every page, as a hono/html fragment rather than JSX: the
 * product page, the one rendered per view, is written the same way (its
 * template says why). Pages written in JSX use it as a component.
 */
export function Layout({ meta, head, children }: { meta: MetaView; head?: Child; children: Child }) {
  return html`${frameStart({ meta, head })}${children}${FRAME_END}`;
}
