// The status page's view: the status model (../observability/statusModel.ts) with every number formatted
// for reading and the chart laid out, so that templates/status.tsx only places escaped strings and numbers.
import { RESOURCE_NAMES } from "../origin/resources";
import type { MetaView } from "./view";
import type { BreakerState } from "../shared/breaker";
import { buildChart } from "./chart";
import { productHref } from "./urls";
import type { ResourceSummary, WindowSummary } from "../observability/metrics";
import type { StatusModel } from "../observability/statusModel";

const DASH = "—";

function percent(value: number | null, digits = 1): string {
  return value === null ? DASH : `${(value * 100).toFixed(digits)}%`;
}

function bytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}

function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.floor((ms % 3_600_000) / 60_000)} min`;
}

const count = (n: number) => n.toLocaleString("en-US");
/** Each of `keys` of `stats`, counted for reading; a dash for each without stats. */
const counts = <K extends string>(stats: Record<K, number> | null, keys: readonly K[]) =>
  Object.fromEntries(keys.map((key) => [key, stats ? count(stats[key]) : DASH])) as Record<K, string>;
const plural = (n: number, one: string, many: string) => `${count(n)} ${n === 1 ? one : many}`;

/** closed: fine; half-open: probing; open: not called. */
function breakerClass(state: BreakerState): string {
  return state === "closed" ? "ok" : state === "half-open" ? "warn" : "bad";
}

function tierRow(name: string, s: ResourceSummary, total = false) {
  return {
    name,
    ...counts(s, ["answers", "stale", "staleIfError", "failed", "collapsed", "defaulted", "streamed", "late"]),
    l1: percent(s.l1Ratio),
    l1Count: count(s.l1),
    location: percent(s.locationRatio),
    locationCount: count(s.location),
    l2: percent(s.l2Ratio),
    l2Count: count(s.l2),
    origin: percent(s.originRatio),
    originCount: count(s.origin),
    hit: percent(s.hitRatio),
    cls: total ? "total" : "",
  };
}

/** One window's page views, by how they ended. */
function pagesRow(label: string, w: WindowSummary) {
  return {
    label,
    views: count(w.pages),
    degraded: count(w.degradedPages),
    ...counts(w.outcomes, ["ok", "absent", "filtered", "unavailable"]),
  };
}

function windowView(label: string, w: WindowSummary) {
  return {
    label,
    rows: [...RESOURCE_NAMES.map((resource) => tierRow(resource, w.resources[resource])), tierRow("all", w.total, true)],
  };
}

/** Each service's origin fetches and breaker. */
function originView(model: StatusModel) {
  return RESOURCE_NAMES.map((service) => {
    const breaker = model.originBreakers[service];
    const a = model.last5m.origin[service];
    const b = model.last15m.origin[service];
    return {
      service,
      fetches5: count(a.fetches),
      errors5: count(a.errors),
      fetches15: count(b.fetches),
      errors15: count(b.errors),
      errorRate15: percent(b.errorRatio),
      shed15: count(b.shed),
      breaker: breaker.state,
      breakerClass: breakerClass(breaker.state),
      errorsClass: a.errors > 0 ? "bad" : "",
    };
  });
}

/** L2's shards, breakers and counts. */
function l2View(model: StatusModel) {
  return {
    configured: model.l2.configured,
    shards: model.l2.shards.map((shard) => ({
      name: shard.name,
      state: shard.state,
      stateClass: breakerClass(shard.state),
      since: shard.since === null ? "since start" : `since ${new Date(shard.since).toISOString().slice(11, 19)} UTC`,
    })),
    ...counts(model.l2.stats, ["skipped", "failures", "outagesDismissed", "droppedWrites", "replayedWrites"]),
    invalidValues: model.l2.invalidValues ? count(model.l2.invalidValues.rejected) : DASH,
    invalidDeleted: model.l2.invalidValues ? count(model.l2.invalidValues.deleted) : DASH,
  };
}

/** The location tier: whether it answers here, what it served and what it turned down. */
function locationView(model: StatusModel) {
  const stats = model.location.stats;
  return {
    enabled: model.location.enabled,
    answering: stats === null ? "off" : stats.hits > 0 ? "yes" : stats.puts > 0 ? "stores, no hit yet" : "no answer yet (on workers.dev it stores nothing)",
    answeringClass: stats !== null && stats.hits > 0 ? "ok" : "warn",
    hitRatio: percent(model.location.hitRatio),
    ...counts(stats, ["hits", "lookups", "purged", "unvouched", "invalid", "errors", "puts", "putsFailed", "putsDropped"]),
  };
}

/** The known-ids filter's state, or that it is off. */
function knownIdsView({ knownIds }: StatusModel) {
  if (!knownIds.enabled) return { enabled: false as const };
  const { state, location } = knownIds;
  return {
    enabled: true as const,
    state,
    stateClass: state === "ready" ? "ok" : state === "cold" || state === "loading" ? "warn" : "bad",
    serving: knownIds.serving ? "yes" : "no (failing open: every id may exist)",
    version: knownIds.version ?? DASH,
    count: knownIds.count === null ? DASH : count(knownIds.count),
    age: knownIds.ageMs === null ? DASH : duration(knownIds.ageMs),
    pendingAdds: count(knownIds.pendingAdds),
    loads: location
      ? `${count(knownIds.loads)} (${count(location.hits)} from the location tier, which lacked it ${count(location.misses)} times; ${count(location.puts)} put there)`
      : count(knownIds.loads),
  };
}

/** The settings in force, and each resource's policy. */
function configView(model: StatusModel) {
  const policies = Object.entries(model.config.policies).map(([name, p]) => ({
    name,
    core: p.core ? "yes" : "no",
    ttl: `${p.ttl} s`,
    swr: `${p.swr} s`,
    staleIfError: `${p.staleIfError} s`,
    negativeTtl: `${p.negativeTtl} s`,
    originTimeout: `${p.originTimeoutMs} ms`,
  }));

  return {
    rows: [
      { name: "Caching", value: model.config.caching ? "on" : "off (CACHING=off: every page from the origin)" },
      { name: "Origin", value: model.config.originUrl },
      { name: "L2 (Redis)", value: model.config.l2 ? model.config.l2Shards.map((shard) => `${shard.name} ${shard.url}`).join(", ") : "off" },
      { name: "Location tier", value: model.config.locationCache ? "on" : "off" },
      { name: "L1 bound", value: bytes(model.config.l1MaxBytes) },
      { name: "L2 timeout", value: `${model.config.l2TimeoutMs} ms` },
      { name: "Fill lock (held and waited for)", value: `${model.config.lockTtlMs} ms` },
      { name: "Purge poll", value: `${model.config.purgePollMs} ms` },
      {
        name: "Known-ids filter",
        value: model.config.knownIds
          ? `room for ${count(model.config.knownIds.room)} new ids, false positives ${percent(model.config.knownIds.fpRate, 2)}`
          : "off",
      },
    ],
    policies,
  };
}

/** What templates/status.tsx is given. */
export type StatusView = ReturnType<typeof statusView>;

export function statusView(model: StatusModel) {
  const w5 = model.last5m;
  const w15 = model.last15m;
  const l1Percent = Math.min(100, Math.max(0, model.l1.usedRatio * 100));

  return {
    meta: { title: `Status · isolate ${model.isolate.id}`, description: null, canonical: null, robots: "noindex, nofollow", og: null } satisfies MetaView,
    isolate: {
      id: model.isolate.id,
      generatedAt: model.generatedAt.replace("T", " ").replace(/\.\d+Z$/, " UTC"),
      uptime: duration(model.isolate.uptimeMs),
    },
    cards: [
      { label: "Page views", value: count(w5.pages), detail: `${count(w15.pages)} in 15 min` },
      { label: "Hit ratio, L1 + L2", value: percent(w5.total.hitRatio), detail: `${percent(w15.total.hitRatio)} over 15 min` },
      {
        label: "Origin fetches",
        value: count(w5.originTotal.fetches),
        detail: `${plural(w5.originTotal.errors, "error", "errors")} · ${count(w15.originTotal.fetches)} in 15 min`,
      },
      {
        label: "503 and 429 pages",
        value: count(w5.outcomes.unavailable),
        detail: `${count(w15.outcomes.unavailable)} in 15 min`,
        bad: w5.outcomes.unavailable > 0,
      },
      { label: "Degraded pages", value: count(w5.degradedPages), detail: `${count(w15.degradedPages)} in 15 min`, bad: w5.degradedPages > 0 },
      { label: "Known-ids 404s", value: count(w5.outcomes.filtered), detail: `${plural(w5.outcomes.absent, "origin 404", "origin 404s")}` },
    ].map(({ bad, ...card }) => ({ ...card, cls: bad ? "card bad" : "card" })),
    windows: [windowView("Last 5 minutes", w5), windowView("Last 15 minutes", w15)],
    pages: [pagesRow("Last 5 minutes", w5), pagesRow("Last 15 minutes", w15)],
    origin: originView(model),
    l2: l2View(model),
    location: locationView(model),
    leases: {
      slotsInUse: count(model.originSlots.inUse),
      slotsQueued: count(model.originSlots.queued),
      slotsReclaimed: count(model.originSlots.reclaimed),
      reclaimedClass: model.originSlots.reclaimed > 0 ? "warn" : "ok",
      fillsInFlight: count(model.fills.inFlight),
      fillsTakenOver: count(model.fills.takenOver),
      claimCalls: claimsView(model.fills.outbox),
      writeSends: writesView(model.fills.outbox),
    },
    overload: overloadView(model.overload),
    l1: {
      used: bytes(model.l1.bytes),
      bound: bytes(model.l1.maxBytes),
      percent: percent(model.l1.usedRatio),
      // The bar's width, in % of its track; at least a sliver so that "almost empty" still shows.
      barWidth: model.l1.bytes > 0 ? Math.max(0.5, Math.round(l1Percent * 10) / 10) : 0,
      barColor: l1Percent >= 95 ? "#8a4500" : "#0b4fa8",
      entries: count(model.l1.entries),
      evictions: count(model.l1.evictions),
    },
    purges: {
      enabled: model.purges.enabled,
      seq: String(model.purges.seq),
      syncAge: model.purges.syncAgeMs === null ? "never synced" : `${duration(model.purges.syncAgeMs)} ago`,
      blind: model.purges.blind ? "yes: Redis unreachable, old entries are refreshed" : "no",
      blindClass: model.purges.blind ? "bad" : "ok",
      widePurges: count(model.purges.widePurges),
      reads: `${count(model.purges.logReads)} from Redis, ${count(model.purges.sharedReadsTaken)} shared by another isolate here`,
      pollMs: `${model.config.purgePollMs} ms`,
    },
    knownIds: knownIdsView(model),
    hot: model.hotProducts.map((item) => ({
      id: item.id,
      href: productHref(item.id),
      count: count(item.count),
      // Space-saving estimates: the true count is within [count − error, count].
      error: item.error > 0 ? `± ${count(item.error)}` : "exact",
    })),
    hotNote: `Top ${model.hotProducts.length} of ${count(model.hotTracking.offered)} page views since the isolate started, from ${model.hotTracking.capacity} space-saving counters`,
    chart: buildChart(model.perMinute),
    config: configView(model),
  };
}

/** Admission and departures (overload/): how late the isolate runs, what it shed, and work nobody waited for. */
function overloadView(overload: StatusModel["overload"]) {
  const { admission, departures, hold } = overload;
  const shed = admission.shed.busy + admission.shed.overShare;
  return {
    lag: `${count(admission.lagMs)} ms (${admission.congested ? `more than ${count(overload.targetMs)} ms for ${count(overload.intervalMs)} ms: congested` : "no standing queue"})`,
    lagClass: admission.congested ? "bad" : "ok",
    coldPages: `${count(admission.coldPages)} in progress, ${count(admission.limit)} at most now (of ${count(overload.coldPagesMax)}); ${count(admission.coldPagesQueued)} waiting for their turn`,
    admitted: count(admission.admitted),
    shed: `${count(shed)} (${count(admission.shed.busy)} answered 503, with no turn within their wait or no room to wait; ${count(admission.shed.overShare)} answered 429, their client holding more than its share; ${count(admission.pushedOut)} of all these gave their place in the full queue to a client holding fewer): ${count(admission.shedServedStale)} served from a copy, ${count(admission.shedRefused)} with a part missing (503 or a default)`,
    shedClass: shed > 0 ? "warn" : "ok",
    pagesLeft: count(departures.pagesLeft),
    hold: `${hold.holdMs > 0 ? `${count(hold.holdMs)} ms now` : "none now"} (${percent(hold.departedShare)} of recent cold pages left before their answer; at most ${count(hold.maxHoldMs)} ms); ${count(hold.held)} pages held, ${count(hold.leftWhileHeld)} of them left during the hold`,
    holdClass: hold.holdMs > 0 ? "warn" : "ok",
    fillsStopped: count(departures.fillsStopped),
    backgroundFills: `${count(departures.fillsFinished)} written, ${count(departures.fillsDropped)} dropped past the limit; ${count(departures.backgroundFills)} now`,
  };
}

/** The outbox's lock claims (cache/l2/outbox.ts): how many calls they took, and how many went in another request's call. */
function claimsView(stats: StatusModel["fills"]["outbox"]): string {
  if (!stats) return "off (no L2)";
  const lapsed = stats.lapsed > 0 ? `, ${count(stats.lapsed)} unanswered when their call's lease ended` : "";
  return `${count(stats.claims)} claims in ${count(stats.claimCalls)} calls; ${count(stats.joined)} went in another request's call${lapsed}`;
}

/** The outbox's fill writes: carried by claim calls, or sent on their own, and what waits or was dropped. */
function writesView(stats: StatusModel["fills"]["outbox"]): string {
  if (!stats) return "off (no L2)";
  return `${count(stats.carried)} went with a lock claim, ${count(stats.writeCalls)} calls of writes alone; ${count(stats.queued)} waiting, ${count(stats.expired)} dropped late`;
}
