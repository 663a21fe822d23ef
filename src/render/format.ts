// Text the page shows for numbers and states. Pure functions, no template knowledge, so they are
// easy to test and reuse (JSON-LD needs the same minor-unit arithmetic as the visible price).
import type { Inventory, Money, StockStatus } from "../origin/types";
import type { Section } from "./model";

/** The page is English (`<html lang="en">`); numbers follow it. */
const LOCALE = "en-US";

// Intl accepts any well-formed three-letter code (it would print "XYZ 12.34" for a made-up one); the supported list lets us treat
// unknown codes as unknown and fall back to a plain "12.34 XYZ" instead. Its codes are upper case: "usd" or "us" is unknown too.
const supportedCurrencies: ReadonlySet<string> = new Set(Intl.supportedValuesOf("currency"));

// Building an Intl.NumberFormat is far slower than using one; the cache is bounded by the set of known currencies
// (a few hundred at most). Each keeps its fraction digits: `resolvedOptions()` allocates on every call.
const formatters = new Map<string, { format: Intl.NumberFormat; digits: number }>();

function currencyFormatter(currency: string): { format: Intl.NumberFormat; digits: number } | null {
  if (!supportedCurrencies.has(currency)) return null;
  let formatter = formatters.get(currency);
  if (!formatter) {
    const format = new Intl.NumberFormat(LOCALE, { style: "currency", currency });
    // A currency format always resolves its fraction digits (ECMA-402, the currency's ISO 4217 minor unit).
    formatter = { format, digits: format.resolvedOptions().maximumFractionDigits! };
    formatters.set(currency, formatter);
  }
  return formatter;
}

/** Plain counts: one formatter for the isolate (`toLocaleString` builds a new one on every call). */
const countFormat = new Intl.NumberFormat(LOCALE);

/** How many minor digits the currency has: 2 for USD, 0 for JPY, 3 for KWD. */
export function minorDigits(currency: string): number {
  // An unknown currency: two, the minor unit of most of ISO 4217's currencies.
  return currencyFormatter(currency)?.digits ?? 2;
}

/**
 * The amount as a plain decimal string ("129.99", "1500", "12.345"), built with integer arithmetic so that no binary floating
 * point rounding shows. `digits`: the currency's minor digits, when already known (formatMoney has its formatter's).
 */
export function decimalAmount(money: Money, digits = minorDigits(money.currency)): string {
  // An integer: the contract's schema takes safe integers only (origin/schemaParts.ts).
  const sign = money.amount < 0 ? "-" : "";
  const abs = Math.abs(money.amount);
  if (digits === 0) return `${sign}${abs}`;
  const scale = 10 ** digits;
  const whole = Math.floor(abs / scale);
  const fraction = String(abs % scale).padStart(digits, "0");
  return `${sign}${whole}.${fraction}`;
}

/** "$129.99", "€129.99", "¥1,500", "KWD 12.345"; unknown currency: "12.34 XYZ". Never throws. */
export function formatMoney(money: Money): string {
  const formatter = currencyFormatter(money.currency);
  if (!formatter) return `${decimalAmount(money)} ${money.currency}`.trim();
  // The decimal string, not minor units ÷ 10^digits: Intl formats a string exactly, where a
  // large amount divided in floating point would print other cents than the JSON-LD's price.
  return formatter.format.format(decimalAmount(money, formatter.digits) as Intl.StringNumericLiteral);
}

/**
 * Whole-percent discount of `price` against `compareAt`, or null when there is
 * no real discount to show (absent, not higher, or another currency).
 */
export function discountPercent(price: Money, compareAt: Money | undefined): number | null {
  if (!compareAt || compareAt.currency !== price.currency) return null;
  if (!(compareAt.amount > price.amount) || !(price.amount >= 0)) return null;
  const percent = Math.round(((compareAt.amount - price.amount) / compareAt.amount) * 100);
  return percent > 0 ? percent : null;
}

// Ratings (0 to 5) and counts (whole, not negative) are as the contract's
// schemas bound them (origin/resources.ts), whether fetched or read from L2.

/** "4.6 out of 5 stars": what a screen reader should hear. */
export function ratingText(rating: number): string {
  return `${Math.round(rating * 10) / 10} out of 5 stars`;
}

/** "★★★★☆": the visual form of the rating, rounded to whole stars (aria-hidden in the page). */
export function ratingStars(rating: number): string {
  const full = Math.round(rating);
  return "★".repeat(full) + "☆".repeat(5 - full);
}

/** "1 review", "213 reviews". */
export function reviewCountText(count: number): string {
  return `${countFormat.format(count)} ${count === 1 ? "review" : "reviews"}`;
}

export interface Availability {
  state: StockStatus | "unknown";
  text: string;
}

export const AVAILABILITY_UNKNOWN_TEXT = "Availability unknown — check again shortly";

/**
 * What to promise about stock. Unknown inventory is never shown as in stock, and a count of zero wins over a status that says otherwise.
 */
export function availability(known: Section<Inventory>): Availability {
  if (known.state !== "ok") return { state: "unknown", text: AVAILABILITY_UNKNOWN_TEXT };
  const { status, available } = known.data;
  if (status === "out_of_stock" || available <= 0) return { state: "out_of_stock", text: "Out of stock" };
  if (status === "low_stock") return { state: "low_stock", text: `Only ${countFormat.format(available)} left` };
  return { state: "in_stock", text: "In stock" };
}

/**
 * Collapses whitespace and cuts at a word boundary, adding "…", so that the result (with the ellipsis) is at most `max` characters.
 */
export function truncateText(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  if (flat.length <= max) return flat;
  // Leave room for the ellipsis; avoid cutting a surrogate pair in half.
  let cut = flat.slice(0, max - 1);
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  const space = cut.lastIndexOf(" ");
  if (space > max * 0.6) cut = cut.slice(0, space);
  return `${cut.replace(/[\s.,;:!?-]+$/, "")}…`;
}
