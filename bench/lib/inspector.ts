// A DevTools-protocol session with workerd's inspector (bench/stack.ts starts
// workers with `inspectorPort` and finds the isolate's websocket URL).
import { once } from "node:events";
import WebSocket from "ws";

export interface Inspector {
  call<T = unknown>(method: string, params?: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  close(): void;
}

export async function openInspector(url: string): Promise<Inspector> {
  const ws = new WebSocket(url, { maxPayload: 512 * 1024 * 1024 });
  const replies = new Map<number, { done: (result: unknown) => void; fail: (error: Error) => void }>();
  ws.on("message", (data: Buffer) => {
    const message = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: { message: string } };
    if (message.id === undefined) return;
    const reply = replies.get(message.id);
    replies.delete(message.id);
    if (message.error) reply?.fail(new Error(message.error.message));
    else reply?.done(message.result);
  });
  await once(ws, "open");
  let nextId = 0;
  return {
    call<T>(method: string, params: Record<string, unknown> = {}, timeoutMs = 30_000) {
      return new Promise<T>((done, fail) => {
        const id = ++nextId;
        const timer = setTimeout(() => (replies.delete(id), fail(new Error(`${method}: no answer in ${timeoutMs} ms`))), timeoutMs);
        replies.set(id, { done: (result) => (clearTimeout(timer), done(result as T)), fail: (error) => (clearTimeout(timer), fail(error)) });
        ws.send(JSON.stringify({ id, method, params }));
      });
    },
    close: () => ws.terminate(),
  };
}
