// The operators' status page of one isolate (GET /__status): every number
// comes formatted and the chart laid out from statusView (src/render/),
// so that this only places escaped strings and numbers.
import { raw } from "hono/html";
import type { Child } from "hono/jsx";
import type { StatusView } from "../src/render/statusView";
import { Layout } from "./layout";

// The page's own styles, a constant (no untrusted text): raw, as CSS must be.
const STATUS_CSS = raw(`
.status-head{display:flex;flex-wrap:wrap;align-items:baseline;justify-content:space-between;gap:.5rem}
.status-head p{margin:0;color:#4d4d4d;font-size:.9rem}
h2.glance{font-size:1rem;margin:1.25rem 0 .5rem}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(10.5rem,1fr));gap:.75rem;margin:0;padding:0;list-style:none}
.card{border:1px solid #c4c4c4;border-radius:.4rem;padding:.6rem .8rem}
.card span{display:block;font-size:.85rem;color:#4d4d4d}
.card strong{display:block;font-size:1.6rem;line-height:1.3;font-variant-numeric:tabular-nums}
.card.bad strong{color:#a4161a}
.card small{color:#4d4d4d}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.9rem;font-variant-numeric:tabular-nums}
caption{text-align:left;font-weight:600;padding:.25rem 0}
th,td{padding:.3rem .5rem;border-bottom:1px solid #dcdcdc;text-align:right;white-space:nowrap}
td small{color:#4d4d4d;font-size:.8rem}
th:first-child,td:first-child{text-align:left}
thead th{background:#f4f4f4;font-weight:600;white-space:normal;overflow-wrap:normal;vertical-align:bottom}
tr.total td{font-weight:700;border-top:2px solid #c4c4c4}
td.bad{color:#a4161a;font-weight:700}
.pill{display:inline-block;padding:0 .55rem;border-radius:1rem;font-weight:600;font-size:.85rem}
.pill.ok{background:#e3f4e8;color:#17653a}
.pill.warn{background:#fdf0d9;color:#8a4500}
.pill.bad{background:#fbe3e4;color:#a4161a}
.panels{display:grid;gap:0 2.5rem}
.panels>*{min-width:0}
.panels h2{margin-top:1.5rem}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0 0 .75rem}
dl.kv dt{font-weight:600}
dl.kv dd{margin:0;font-variant-numeric:tabular-nums}
.meter{display:block;width:100%;max-width:28rem;height:14px;margin:.35rem 0}
.chart{margin:0}
.chart>svg{display:block;width:100%;height:auto;max-width:60rem}
.chart text{font:11px system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;fill:#4d4d4d}
.legend{display:flex;flex-wrap:wrap;gap:.35rem 1.25rem;font-size:.85rem;color:#4d4d4d;margin-top:.25rem}
.legend svg{vertical-align:-2px;margin-right:.3rem}
.hot{columns:2 14rem;padding-left:1.75rem;margin:0;font-variant-numeric:tabular-nums}
.hot li{padding:.1rem 0}
.hot small{color:#4d4d4d}
.note{color:#4d4d4d;font-size:.85rem}
@media (min-width:60rem){.panels{grid-template-columns:1fr 1fr}}
`);

const TIER_COLUMNS = [
  "resource",
  "answers",
  "hit ratio",
  "L1",
  "location",
  "L2",
  "origin",
  "stale",
  "stale-if-error",
  "failed",
  "collapsed",
  "defaulted",
  "streamed",
  "late",
];

/** A table that scrolls sideways on a narrow screen: its column heads, and its rows as given. */
function ScrollTable({ columns, caption, children }: { columns: string[]; caption?: string; children: Child }) {
  return (
    <div class="scroll">
      <table>
        {caption !== undefined ? <caption>{caption}</caption> : null}
        <thead>
          <tr>
            {columns.map((column) => (
              <th scope="col">{column}</th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

export function StatusPage(view: StatusView) {
  const { isolate, chart, l2, location, l1, leases, overload, purges, knownIds, config } = view;
  return (
    <Layout meta={view.meta} head={<style>{STATUS_CSS}</style>}>
      <div class="status-head">
        <h1>Status of this isolate</h1>
        <p>
          isolate <strong>{isolate.id}</strong> · up {isolate.uptime} · {isolate.generatedAt}
        </p>
      </div>
      <p class="note">
        Counters of this isolate only (every isolate has its own L1 and its own counters), in 1-minute buckets: "last 5 minutes" is the current minute and the 4
        before it. Every isolate together, this isolate among them by its name: <code>npm run fleet -- --since 1h</code> (the fleet's figures from Workers
        Analytics Engine; the README's "Seeing the fleet").
      </p>

      <h2 id="glance" class="glance">
        Last 5 minutes
      </h2>
      <ul class="cards" aria-labelledby="glance">
        {view.cards.map((card) => (
          <li class={card.cls}>
            <span>{card.label}</span>
            <strong>{card.value}</strong>
            <small>{card.detail}</small>
          </li>
        ))}
      </ul>

      <h2 id="chart">Hit ratio and origin fetches per minute</h2>
      <figure class="chart">
        <svg
          viewBox={`0 0 ${chart.width} ${chart.height}`}
          width={chart.width}
          height={chart.height}
          role="img"
          aria-labelledby="chart-title chart-desc"
          xmlns="http://www.w3.org/2000/svg"
        >
          <title id="chart-title">Hit ratio (line) and origin fetches (bars) per minute, last 15 minutes</title>
          <desc id="chart-desc">{chart.description}</desc>
          {chart.gridLines.map((grid) => (
            <line x1={chart.plot.left} x2={chart.plot.right} y1={grid.y} y2={grid.y} stroke="#e4e4e4" stroke-width="1" />
          ))}
          {chart.bars.map((bar) => (
            <g>
              <title>{bar.title}</title>
              <rect x={bar.x} y={bar.y} width={bar.width} height={bar.height} fill="#e9a45b" />
              <rect x={bar.x} y={bar.errorY} width={bar.width} height={bar.errorHeight} fill="#a4161a" />
            </g>
          ))}
          <line x1={chart.plot.left} x2={chart.plot.right} y1={chart.plot.bottom} y2={chart.plot.bottom} stroke="#767676" stroke-width="1" />
          <line x1={chart.plot.left} x2={chart.plot.left} y1={chart.plot.top} y2={chart.plot.bottom} stroke="#0b4fa8" stroke-width="1" />
          <line x1={chart.plot.right} x2={chart.plot.right} y1={chart.plot.top} y2={chart.plot.bottom} stroke="#c26a12" stroke-width="1" />
          {chart.ratioPath !== "" ? (
            <path d={chart.ratioPath} fill="none" stroke="#0b4fa8" stroke-width="2.5" stroke-linejoin="round" stroke-linecap="round" />
          ) : null}
          {chart.ratioDots.map((dot) => (
            <circle cx={dot.cx} cy={dot.cy} r="3.5" fill="#0b4fa8">
              <title>{dot.title}</title>
            </circle>
          ))}
          {chart.leftTicks.map((tick) => (
            <text x={tick.x} y={tick.y} text-anchor="end">
              {tick.label}
            </text>
          ))}
          {chart.rightTicks.map((tick) => (
            <text x={tick.x} y={tick.y} text-anchor="start">
              {tick.label}
            </text>
          ))}
          {chart.xTicks.map((tick) => (
            <text x={tick.x} y={tick.y} text-anchor="middle">
              {tick.label}
            </text>
          ))}
        </svg>
        <figcaption class="legend">
          <span>
            <svg width="22" height="10" aria-hidden="true">
              <line x1="1" x2="21" y1="5" y2="5" stroke="#0b4fa8" stroke-width="2.5" />
            </svg>
            hit ratio, L1 + L2 (left axis)
          </span>
          <span>
            <svg width="12" height="12" aria-hidden="true">
              <rect width="12" height="12" fill="#e9a45b" />
            </svg>
            origin fetches (right axis, max {chart.maxFetches})
          </span>
          <span>
            <svg width="12" height="12" aria-hidden="true">
              <rect width="12" height="12" fill="#a4161a" />
            </svg>
            origin errors
          </span>
        </figcaption>
      </figure>

      <h2 id="tiers">Where answers came from</h2>
      <p class="note">
        One answer per resource per page; the small numbers are counts. L1 and origin are shares of all answers, location (this data center's cache) and L2 the
        shares of what L1 missed; stale: served while refreshing; stale-if-error: served because the origin failed; failed: defaulted section or 503; collapsed:
        waited for another request's fill; streamed: sent after a streamed page's first byte; late: of those, shown with its default past its bound.
      </p>
      {view.windows.map((window) => (
        <ScrollTable columns={TIER_COLUMNS} caption={window.label}>
          {window.rows.map((row) => (
            <tr class={row.cls}>
              <td>{row.name}</td>
              <td>{row.answers}</td>
              <td>{row.hit}</td>
              <td>
                {row.l1} <small>{row.l1Count}</small>
              </td>
              <td>
                {row.location} <small>{row.locationCount}</small>
              </td>
              <td>
                {row.l2} <small>{row.l2Count}</small>
              </td>
              <td>
                {row.origin} <small>{row.originCount}</small>
              </td>
              <td>{row.stale}</td>
              <td>{row.staleIfError}</td>
              <td>{row.failed}</td>
              <td>{row.collapsed}</td>
              <td>{row.defaulted}</td>
              <td>{row.streamed}</td>
              <td>{row.late}</td>
            </tr>
          ))}
        </ScrollTable>
      ))}

      <section aria-labelledby="origin">
        <h2 id="origin">Origin services</h2>
        <ScrollTable columns={["service", "fetches 5 min", "errors 5 min", "fetches 15 min", "errors 15 min", "shed 15 min", "breaker"]}>
          {view.origin.map((row) => (
            <tr>
              <td>{row.service}</td>
              <td>{row.fetches5}</td>
              <td class={row.errorsClass}>{row.errors5}</td>
              <td>{row.fetches15}</td>
              <td>
                {row.errors15} <small>({row.errorRate15})</small>
              </td>
              <td>{row.shed15}</td>
              <td>
                <span class={`pill ${row.breakerClass}`}>{row.breaker}</span>
              </td>
            </tr>
          ))}
        </ScrollTable>
        <p class="note">Shed: not sent, because the isolate's origin slots were full or the service's breaker was open.</p>
      </section>

      <section aria-labelledby="pages">
        <h2 id="pages">Pages</h2>
        <ScrollTable columns={["window", "views", "200", "degraded", "404 origin", "404 known-ids", "503"]}>
          {view.pages.map((row) => (
            <tr>
              <td>{row.label}</td>
              <td>{row.views}</td>
              <td>{row.ok}</td>
              <td>{row.degraded}</td>
              <td>{row.absent}</td>
              <td>{row.filtered}</td>
              <td>{row.unavailable}</td>
            </tr>
          ))}
        </ScrollTable>
      </section>

      <div class="panels">
        <section aria-labelledby="l2">
          <h2 id="l2">L2 (Redis)</h2>
          {l2.configured ? (
            <>
              <ScrollTable columns={["shard", "breaker", "since"]}>
                {l2.shards.map((shard) => (
                  <tr>
                    <td>{shard.name}</td>
                    <td>
                      <span class={`pill ${shard.stateClass}`}>{shard.state}</span>
                    </td>
                    <td>{shard.since}</td>
                  </tr>
                ))}
              </ScrollTable>
              <dl class="kv">
                <dt>calls skipped</dt>
                <dd>
                  {l2.skipped} <small>(breaker open)</small>
                </dd>
                <dt>calls failed</dt>
                <dd>
                  {l2.failures} <small>(error or over the time budget)</small>
                </dd>
                <dt>outages dismissed</dt>
                <dd>
                  {l2.outagesDismissed} <small>(time-outs that would have opened the breaker; Redis answered a direct probe)</small>
                </dd>
                <dt>writes not taken (kept in the backlog)</dt>
                <dd>{l2.droppedWrites}</dd>
                <dt>writes replayed from the backlog</dt>
                <dd>{l2.replayedWrites}</dd>
                <dt>invalid values</dt>
                <dd>
                  {l2.invalidValues} <small>(not valid entries: read as misses; {l2.invalidDeleted} deleted)</small>
                </dd>
              </dl>
              <p class="note">Counted since the isolate started, all shards together.</p>
            </>
          ) : (
            <p>
              <span class="pill warn">off</span> No Redis configured: pages come from L1 and the origin.
            </p>
          )}
        </section>

        <section aria-labelledby="location">
          <h2 id="location">Location tier (this data center's cache)</h2>
          {location.enabled ? (
            <dl class="kv">
              <dt>answering</dt>
              <dd>
                <span class={`pill ${location.answeringClass}`}>{location.answering}</span>
              </dd>
              <dt>hit ratio</dt>
              <dd>
                {location.hitRatio}{" "}
                <small>
                  ({location.hits} copies served of {location.lookups} parts looked up)
                </small>
              </dd>
              <dt>purge rejections</dt>
              <dd>
                {location.purged} <small>(purged since fetched)</small>, {location.unvouched}{" "}
                <small>(stamped before this isolate's knowledge of purges reaches)</small>
              </dd>
              <dt>invalid copies</dt>
              <dd>
                {location.invalid} <small>(read as misses)</small>; lookups failed or late: {location.errors}
              </dd>
              <dt>puts</dt>
              <dd>
                {location.puts}{" "}
                <small>
                  (failed {location.putsFailed}, dropped {location.putsDropped})
                </small>
              </dd>
            </dl>
          ) : (
            <p>
              <span class="pill warn">off</span> LOCATION_CACHE is off, or the runtime has no Cache API.
            </p>
          )}
        </section>

        <section aria-labelledby="l1">
          <h2 id="l1">L1 (this isolate's memory)</h2>
          <dl class="kv">
            <dt>used</dt>
            <dd>
              {l1.used} of {l1.bound} ({l1.percent})
            </dd>
            <dt>entries</dt>
            <dd>{l1.entries}</dd>
            <dt>pushed out by the bound</dt>
            <dd>{l1.evictions}</dd>
          </dl>
          <svg class="meter" viewBox="0 0 100 6" preserveAspectRatio="none" role="img" aria-label={`L1 used: ${l1.percent} of its bound`}>
            <rect width="100" height="6" rx="3" fill="#e4e4e4" />
            <rect width={l1.barWidth} height="6" rx="3" fill={l1.barColor} />
          </svg>
        </section>

        <section aria-labelledby="leases">
          <h2 id="leases">Shared work (leases)</h2>
          <dl class="kv">
            <dt>origin slots in use</dt>
            <dd>{leases.slotsInUse}</dd>
            <dt>callers queued</dt>
            <dd>{leases.slotsQueued}</dd>
            <dt>slots reclaimed</dt>
            <dd>
              <span class={`pill ${leases.reclaimedClass}`}>{leases.slotsReclaimed}</span> <small>(holder's request vanished)</small>
            </dd>
            <dt>fills in flight</dt>
            <dd>{leases.fillsInFlight}</dd>
            <dt>fills taken over</dt>
            <dd>{leases.fillsTakenOver}</dd>
            <dt>lock claims</dt>
            <dd>{leases.claimCalls}</dd>
            <dt>fill writes</dt>
            <dd>{leases.writeSends}</dd>
          </dl>
          <p class="note">Slots and fills are leases with deadlines: a request that vanishes holding one gives it back at its deadline.</p>
        </section>

        <section aria-labelledby="overload">
          <h2 id="overload">Load (admission of new work)</h2>
          <dl class="kv">
            <dt>lateness</dt>
            <dd>
              <span class={`pill ${overload.lagClass}`}>{overload.lag}</span>
            </dd>
            <dt>cold pages in progress</dt>
            <dd>{overload.coldPages}</dd>
            <dt>cold pages admitted</dt>
            <dd>{overload.admitted}</dd>
            <dt>shed</dt>
            <dd>
              <span class={`pill ${overload.shedClass}`}>{overload.shed}</span>
            </dd>
            <dt>visitors who left</dt>
            <dd>
              {overload.pagesLeft} pages not rendered; {overload.fillsStopped} fills stopped before a claim, poll or fetch
            </dd>
            <dt>hold while visitors leave</dt>
            <dd>
              <span class={`pill ${overload.holdClass}`}>{overload.hold}</span>
            </dd>
            <dt>fills nobody waited for</dt>
            <dd>{overload.backgroundFills}</dd>
          </dl>
          <p class="note">
            Pages in L1 are always served. A page that needs new work waits for its turn while the isolate's limit of cold pages is in use (it shrinks while the
            isolate's lateness stands, and grows while it keeps up); past its wait it is shed: a copy usable on error, else a 503 with Retry-After.
          </p>
        </section>

        <section aria-labelledby="purges">
          <h2 id="purges">Purges</h2>
          {purges.enabled ? (
            <dl class="kv">
              <dt>sequence seen</dt>
              <dd>{purges.seq}</dd>
              <dt>last sync</dt>
              <dd>
                {purges.syncAge} <small>(polled every {purges.pollMs})</small>
              </dd>
              <dt>blind</dt>
              <dd>
                <span class={`pill ${purges.blindClass}`}>{purges.blind}</span>
              </dd>
              <dt>reads of the log</dt>
              <dd>{purges.reads}</dd>
              <dt>tag / all purges held</dt>
              <dd>{purges.widePurges}</dd>
            </dl>
          ) : (
            <p>
              <span class="pill warn">off</span> Purges are recorded in Redis, and no Redis is configured.
            </p>
          )}
        </section>

        <section aria-labelledby="known-ids">
          <h2 id="known-ids">Known-ids filter</h2>
          {knownIds.enabled ? (
            <dl class="kv">
              <dt>state</dt>
              <dd>
                <span class={`pill ${knownIds.stateClass}`}>{knownIds.state}</span>
              </dd>
              <dt>answering "no"</dt>
              <dd>{knownIds.serving}</dd>
              <dt>version</dt>
              <dd>{knownIds.version}</dd>
              <dt>ids</dt>
              <dd>{knownIds.count}</dd>
              <dt>age</dt>
              <dd>{knownIds.age}</dd>
              <dt>adds pending</dt>
              <dd>{knownIds.pendingAdds}</dd>
              <dt>loads</dt>
              <dd>{knownIds.loads}</dd>
            </dl>
          ) : (
            <p>
              <span class="pill warn">off</span> No filter: every id goes on to the cache and negative caching.
            </p>
          )}
        </section>
      </div>

      <h2 id="hot">Hot products</h2>
      {view.hot.length > 0 ? (
        <ol class="hot">
          {view.hot.map((item) => (
            <li>
              <a href={item.href}>{item.id}</a>{" "}
              <small>
                {item.count} views ({item.error})
              </small>
            </li>
          ))}
        </ol>
      ) : (
        <p class="muted">No product pages served yet.</p>
      )}
      <p class="note">{view.hotNote}; counts are upper bounds, the ± part the most they may overstate.</p>

      <h2 id="config">Configuration</h2>
      <dl class="kv">
        {config.rows.map((row) => (
          <>
            <dt>{row.name}</dt>
            <dd>{row.value}</dd>
          </>
        ))}
      </dl>
      <ScrollTable columns={["policy", "core", "ttl", "swr", "stale-if-error", "negative ttl", "origin timeout"]}>
        {config.policies.map((p) => (
          <tr>
            <td>{p.name}</td>
            <td>{p.core}</td>
            <td>{p.ttl}</td>
            <td>{p.swr}</td>
            <td>{p.staleIfError}</td>
            <td>{p.negativeTtl}</td>
            <td>{p.originTimeout}</td>
          </tr>
        ))}
      </ScrollTable>
      <p class="note">
        Also as JSON: <a href="/__status.json">/__status.json</a> (same token).
      </p>
    </Layout>
  );
}
