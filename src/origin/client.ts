// The origin client: one GET per resource, each bounded by its service's
// timeout, at most one retry (connection errors only, with jitter), and the
// answer checked against the contract.
import type { ResourcePolicy } from "../config";
import type { ProductIdPage, ResourceName, ResourceTypes } from "./types";
import { productIdPage, validateResource } from "./validate";
import * as v from "valibot";

export type OriginAnswer<T> = { found: true; data: T } | { found: false };

export type OriginFailure = "timeout" | "unreachable" | "status" | "invalid";

export class OriginError extends Error {
  constructor(
    readonly resource: ResourceName | "listing",
    readonly failure: OriginFailure,
    detail: string,
  ) {
    super(`origin ${resource}: ${failure} (${detail})`);
    this.name = "OriginError";
  }
}

export interface OriginClient {
  fetchResource<R extends ResourceName>(resource: R, id: string): Promise<OriginAnswer<ResourceTypes[R]>>;
  listProductIds(cursor: string | null, limit: number): Promise<ProductIdPage>;
}

export interface OriginClientOptions {
  baseUrl: string;
  policies: Record<ResourceName, Pick<ResourcePolicy, "originTimeoutMs">>;
  /** Injected in tests; the global fetch otherwise. */
  fetch?: typeof fetch;
}

const RETRY_DELAY_MS = { min: 20, max: 60 };

function pathFor(resource: ResourceName, id: string): string {
  // Ids are validated before they get here; encoding is belt and braces.
  const safe = encodeURIComponent(id);
  switch (resource) {
    case "product":
      return `/products/${safe}`;
    case "inventory":
      return `/inventory/${safe}`;
    case "reviews":
      return `/reviews/${safe}/summary`;
    case "recommendations":
      return `/recommendations/${safe}`;
  }
}

export function createOriginClient(options: OriginClientOptions): OriginClient {
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));

  /** GET with a deadline; one retry when the connection itself failed (the request never reached a handler). */
  async function get(resource: ResourceName | "listing", url: string, timeoutMs: number): Promise<Response> {
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const remaining = deadline - Date.now();
      try {
        return await doFetch(url, {
          headers: { accept: "application/json" },
          signal: AbortSignal.timeout(Math.max(1, remaining)),
        });
      } catch (error) {
        if (isTimeout(error)) throw new OriginError(resource, "timeout", `no answer within ${timeoutMs} ms`);
        const delay = RETRY_DELAY_MS.min + Math.random() * (RETRY_DELAY_MS.max - RETRY_DELAY_MS.min);
        if (attempt >= 1 || Date.now() + delay >= deadline) {
          throw new OriginError(resource, "unreachable", errorText(error));
        }
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  async function readJson(resource: ResourceName | "listing", response: Response): Promise<unknown> {
    try {
      return await response.json();
    } catch (error) {
      if (isTimeout(error)) throw new OriginError(resource, "timeout", "body too slow");
      throw new OriginError(resource, "invalid", "body is not JSON");
    }
  }

  return {
    async fetchResource(resource, id) {
      const response = await get(resource, options.baseUrl + pathFor(resource, id), options.policies[resource].originTimeoutMs);
      if (response.status === 404) {
        await response.body?.cancel();
        return { found: false };
      }
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new OriginError(resource, "status", `HTTP ${response.status}`);
      }
      const data = validateResource(resource, id, await readJson(resource, response));
      if (!data) throw new OriginError(resource, "invalid", "body does not follow the origin contract");
      return { found: true, data };
    },

    async listProductIds(cursor, limit) {
      const query = new URLSearchParams({ limit: String(limit) });
      if (cursor) query.set("cursor", cursor);
      const response = await get("listing", `${options.baseUrl}/products?${query}`, 10_000);
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new OriginError("listing", "status", `HTTP ${response.status}`);
      }
      const parsed = v.safeParse(productIdPage, await readJson("listing", response));
      if (!parsed.success) throw new OriginError("listing", "invalid", "listing does not follow the origin contract");
      return parsed.output;
    },
  };
}

function isTimeout(error: unknown): boolean {
  return error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
