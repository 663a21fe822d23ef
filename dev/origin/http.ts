// What the demo origin's routes share: the Hono env, the shape of error
// answers, and the contract's id as a valibot schema.
import * as v from "valibot";
import { PRODUCT_ID_PATTERN } from "../../src/origin/types";
import type { NodeBindings } from "./node";

export type OriginEnv = { Bindings: NodeBindings };

export const productId = v.pipe(v.string(), v.regex(PRODUCT_ID_PATTERN, "must match the contract's id pattern"));

/** The body of every error answer: `{ "error": code }`, with a message where one helps. */
export function errorBody(error: string, message?: string): { error: string; message?: string } {
  return message === undefined ? { error } : { error, message };
}

/** A validation issue, from valibot or through Standard Schema. */
interface Issue {
  message: string;
  path?: readonly (PropertyKey | { key: unknown })[] | undefined;
}

/** The first issue, and where it is, as one line: "price: Invalid type: …". */
export function describeIssue(issues: readonly Issue[]): string {
  const issue = issues[0];
  if (issue === undefined) return "invalid";
  const where = issue.path?.map((part) => String(typeof part === "object" ? part.key : part)).join(".");
  return where ? `${where}: ${issue.message}` : issue.message;
}
