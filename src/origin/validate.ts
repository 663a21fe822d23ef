// The origin is another team's service: its answers are checked against the contract before anything is cached or
// rendered. Unknown fields are dropped; a body that breaks the contract is an origin failure, never cached data.
import * as v from "valibot";
import { RESOURCES, type ResourceName, type ResourceTypes } from "./resources";

/** The contract-shaped data, or null when the body breaks the contract. */
export function validateResource<R extends ResourceName>(resource: R, requestedId: string, body: unknown): ResourceTypes[R] | null {
  const result = v.safeParse(RESOURCES[resource].schema, body);
  if (!result.success || (result.output as { id: unknown }).id !== requestedId) return null;
  return result.output as ResourceTypes[R];
}
