// The demo origin's admin API (dev/origin, README "The demo origin"), as the
// tests and the benchmarks call it, wherever the origin runs.
import type { ResourceName } from "../../src/origin/resources";

interface OriginCounters {
  total: number;
  services: Record<string, number>;
}

export class OriginAdmin {
  constructor(readonly url: string) {}

  /** One admin call's JSON answer, whatever its status (a test may look at a refusal), taken to be a `T` (the admin API's own answer: not checked). */
  async request<T = unknown>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
    return (await this.send(path, init.method ?? (init.body === undefined ? "GET" : "POST"), init.body)).json() as Promise<T>;
  }

  private send(path: string, method: string, body: unknown): Promise<Response> {
    return fetch(this.url + path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      // The admin endpoints are never slowed or faulted: a call this long means the origin is stuck.
      signal: AbortSignal.timeout(10_000),
    });
  }

  /** One admin call that must succeed: its JSON answer, or an error naming the call. */
  private async call<T = unknown>(path: string, method = "GET", body?: unknown): Promise<T> {
    const response = await this.send(path, method, body);
    if (!response.ok) throw new Error(`origin admin ${method} ${path}: HTTP ${response.status} ${await response.text()}`);
    return response.json() as Promise<T>;
  }

  async counters(): Promise<OriginCounters> {
    const body = await this.call<OriginCounters>("/__admin/counters");
    return { total: body.total, services: body.services };
  }

  /** Requests each service received for one product since the last reset, by service. */
  async countsOf(id: string): Promise<Record<string, number>> {
    return (await this.outcomesOf(id)).requests;
  }

  /** The same, and of those the ones answered with an injected failure (a 500, a refused or dropped connection). */
  async outcomesOf(id: string): Promise<{ requests: Record<string, number>; failed: Record<string, number> }> {
    const body = await this.call<{ ids?: Record<string, number> }>("/__admin/counters");
    const outcomes = { requests: {} as Record<string, number>, failed: {} as Record<string, number> };
    for (const [key, count] of Object.entries(body.ids ?? {})) {
      const [service, of, failed] = key.split(":");
      if (of === id) outcomes[failed === undefined ? "requests" : "failed"][service!] = count;
    }
    return outcomes;
  }

  async resetCounters(): Promise<void> {
    await this.call("/__admin/counters/reset", "POST");
  }

  /** `{service, latencyMs, errorRate, down}` as the admin API takes it: one service's faults, or every service's (`all`, the default). */
  async setFaults(fault: { service?: ResourceName | "all"; latencyMs?: number; down?: "refuse" | "500" | "hang" | false; errorRate?: number }): Promise<void> {
    await this.call("/__admin/faults", "PUT", { service: "all", latencyMs: 0, errorRate: 0, down: false, ...fault });
  }

  async clearFaults(): Promise<void> {
    await this.call("/__admin/faults", "DELETE");
  }

  /**
   * Changes a product's price (minor units); the origin bumps its version
   * and tells the tier (its purge URL), unless `notify` is false: then the
   * caller is the shop's backend that purges.
   */
  async changePrice(id: string, price: number, { notify = true } = {}): Promise<{ purge: unknown }> {
    return this.call<{ purge: unknown }>(`/__admin/products/${id}`, "POST", notify ? { price } : { price, notify });
  }
}
