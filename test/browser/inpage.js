// Runs inside the page (added as an init script by pages.test.ts): measures
// layout shift from the first paint on, and offers the checks that need the
// live DOM and computed styles as `window.__pp`. Plain browser JavaScript, so
// the TypeScript project (Workers types, no DOM lib) never compiles it.
(() => {
  const state = { cls: 0, shifts: [] };
  try {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        // Shifts right after input are expected (and excluded by the CLS definition).
        if (entry.hadRecentInput) continue;
        state.cls += entry.value;
        state.shifts.push({
          value: entry.value,
          sources: (entry.sources || []).map((s) => (s.node?.nodeName ? describe(s.node) : "?")),
        });
      }
    }).observe({ type: "layout-shift", buffered: true });
  } catch {
    state.cls = Number.NaN; // layout-shift not supported: the test fails rather than pass blind
  }

  function describe(node) {
    if (!(node instanceof Element)) return node.nodeName;
    const cls = node.classList.length ? `.${[...node.classList].join(".")}` : "";
    return node.tagName.toLowerCase() + cls;
  }

  function parseColor(text) {
    const m = /rgba?\(([^)]+)\)/.exec(text);
    if (!m) return null;
    const parts = m[1]
      .split(/[\s,/]+/)
      .filter(Boolean)
      .map(Number);
    return { r: parts[0], g: parts[1], b: parts[2], a: parts.length > 3 ? parts[3] : 1 };
  }

  function blend(top, bottom) {
    const a = top.a;
    return { r: top.r * a + bottom.r * (1 - a), g: top.g * a + bottom.g * (1 - a), b: top.b * a + bottom.b * (1 - a), a: 1 };
  }

  function luminance({ r, g, b }) {
    const channel = (v) => {
      const c = v / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  }

  function ratio(a, b) {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  }

  /** The colour actually behind `el`: the nearest opaque background up the tree, blended. */
  function effectiveBackground(el) {
    const layers = [];
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const style = getComputedStyle(node);
      if (style.backgroundImage && style.backgroundImage !== "none") layers.push({ image: true });
      const color = parseColor(style.backgroundColor);
      if (color && color.a > 0) {
        layers.push(color);
        if (color.a >= 1) break;
      }
    }
    let result = { r: 255, g: 255, b: 255, a: 1 }; // the canvas
    for (const layer of layers.reverse()) if (!layer.image) result = blend(layer, result);
    return { color: result, hasImage: layers.some((layer) => layer.image) };
  }

  function hex({ r, g, b }) {
    return `#${[r, g, b].map((v) => Math.round(v).toString(16).padStart(2, "0")).join("")}`;
  }

  function isShown(el) {
    const rect = el.getBoundingClientRect();
    if (rect.width <= 1 || rect.height <= 1) return false; // visually hidden or empty
    if (rect.right <= 0 || rect.bottom <= 0) return false; // parked off-screen (skip link)
    const style = getComputedStyle(el);
    return style.visibility !== "hidden" && style.display !== "none" && Number(style.opacity) > 0;
  }

  /** Text a sighted visitor sees in `el`: visually hidden helpers removed. */
  function visibleText(el) {
    if (!el) return null;
    const copy = el.cloneNode(true);
    copy.querySelectorAll(".visually-hidden, [hidden]").forEach((n) => n.remove());
    return copy.textContent.replace(/\s+/g, " ").trim();
  }

  /** Every element that directly holds visible text, with its contrast against what is behind it. */
  function contrast() {
    const rows = [];
    for (const el of document.body.querySelectorAll("*")) {
      if (["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE"].includes(el.tagName)) continue;
      const ownText = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim() !== "");
      if (!ownText || !isShown(el)) continue;
      const style = getComputedStyle(el);
      const background = effectiveBackground(el);
      const fg = blend(parseColor(style.color), background.color);
      rows.push({
        element: describe(el),
        text: el.textContent.replace(/\s+/g, " ").trim().slice(0, 40),
        color: hex(fg),
        background: hex(background.color),
        overImage: background.hasImage,
        ratio: Math.round(ratio(fg, background.color) * 100) / 100,
        fontSize: parseFloat(style.fontSize),
        fontWeight: Number(style.fontWeight),
      });
    }
    return rows;
  }

  /** What the keyboard focus is on now, and whether it is visible. */
  function focused() {
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    const style = getComputedStyle(el);
    const outlineWidth = parseFloat(style.outlineWidth) || 0;
    const outline = style.outlineStyle !== "none" && outlineWidth >= 2 ? parseColor(style.outlineColor) : null;
    const background = effectiveBackground(el.parentElement || el).color;
    const rect = el.getBoundingClientRect();
    return {
      element: describe(el),
      href: el.getAttribute("href"),
      text: el.textContent.replace(/\s+/g, " ").trim().slice(0, 60),
      inRecommendations: Boolean(el.closest(".recommendations")),
      focusVisible: el.matches(":focus-visible"),
      outlineWidth,
      // WCAG 1.4.11: the focus indicator against what is around it, at least 3:1.
      outlineContrast: outline ? Math.round(ratio(blend(outline, background), background) * 100) / 100 : 0,
      boxShadow: style.boxShadow,
      onScreen: rect.width > 1 && rect.height > 1 && rect.right > 0 && rect.bottom > 0,
    };
  }

  function images() {
    return [...document.images].map((img) => {
      const rect = img.getBoundingClientRect();
      return {
        src: img.getAttribute("src"),
        alt: img.getAttribute("alt"),
        loading: img.getAttribute("loading"),
        width: img.getAttribute("width"),
        height: img.getAttribute("height"),
        complete: img.complete,
        naturalWidth: img.naturalWidth,
        top: rect.top + window.scrollY,
        // An empty alt is only right when the image sits in a link or figure that names itself in text.
        labelledByText: Boolean(img.closest("a, figure") && visibleText(img.closest("a, figure")) !== ""),
        gallery: Boolean(img.closest(".gallery")),
      };
    });
  }

  function structure() {
    const jsonLd = [...document.querySelectorAll('script[type="application/ld+json"]')].map((s) => s.textContent);
    const price = document.querySelector(".price-now");
    return {
      lang: document.documentElement.getAttribute("lang"),
      title: document.title,
      h1: [...document.querySelectorAll("h1")].map((h) => visibleText(h)),
      jsonLd,
      shownPrice: visibleText(price),
      shownAvailability: visibleText(document.querySelector(".availability")),
      availabilityClass: document.querySelector(".availability")?.className ?? null,
      recommendationLinks: [...document.querySelectorAll(".recommendations a")].map((a) => a.getAttribute("href")),
      horizontalOverflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
      stylesheets: document.querySelectorAll('link[rel~="stylesheet"]').length,
      inlineStyleBytes: [...document.querySelectorAll("style")].reduce((n, s) => n + s.textContent.length, 0),
      externalScripts: document.querySelectorAll("script[src]").length,
    };
  }

  window.__pp = {
    cls: () => ({ cls: state.cls, shifts: state.shifts }),
    contrast,
    focused,
    images,
    structure,
  };
})();
