// `ws` (Miniflare's websocket package) ships no types: the little the benchmarks use of it.
declare module "ws" {
  import { EventEmitter } from "node:events";
  export default class WebSocket extends EventEmitter {
    constructor(url: string, options?: { maxPayload?: number });
    send(data: string): void;
    terminate(): void;
  }
}
