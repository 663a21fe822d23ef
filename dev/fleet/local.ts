// Where `DEV_ISOLATES=2 npm run dev` runs the local fleet recorder, and the
// token it takes: what `npm run fleet -- --local` asks by default.
export const LOCAL_RECORDER_PORT = 8790;
export const LOCAL_RECORDER_TOKEN = "dev-fleet-token";

/** The recorder's SQL API (Analytics Engine's address, account "local"). */
export function localSqlUrl(base: string): string {
  return `${base.replace(/\/$/, "")}/client/v4/accounts/local/analytics_engine/sql`;
}
