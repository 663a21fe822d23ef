import type { Env } from "../config";
import type { TierServices } from "../tier";

/** What every route sees: the bindings, and this isolate's tier (set by the app's first middleware). */
export type AppEnv = { Bindings: Env; Variables: { tier: TierServices } };
