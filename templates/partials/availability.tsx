import type { SectionViews } from "../../src/render/view";

/** What the page promises about stock (unknown stock is never shown as in stock: format.ts). */
export function AvailabilityNote({ availability }: { availability: SectionViews["inventory"] }) {
  return (
    <p class={`availability availability--${availability.state}`}>
      <span class="visually-hidden">Availability: </span>
      {availability.text}
    </p>
  );
}
