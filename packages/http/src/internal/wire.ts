/**
 * The wire form of a Tether event and the Server-Sent Events framing.
 *
 * @internal
 */
import * as Event from "@tether/core/Event"
import * as Schema from "effect/Schema"

const encodeEvent = Schema.encodeSync(Event.Event)

/**
 * The event as JSON, without what stays with the host: the instructions (in `RunStarted` and
 * the result), the provider's raw output (only its byte counts are kept) and notices' raw records.
 *
 * @internal
 */
export const toWire = (event: Event.Event): unknown => {
  const encoded = encodeEvent(event) as { readonly [key: string]: unknown }
  switch (event._tag) {
    case "RunStarted": {
      const { instructions: _, ...rest } = encoded
      return rest
    }
    case "Notice": {
      const { raw: _, ...rest } = encoded
      return rest
    }
    case "RunFinished": {
      const { instructions: _, raw, ...result } = encoded["result"] as { readonly [key: string]: unknown }
      const bytes = raw as { readonly stdoutBytes: number; readonly stderrBytes: number }
      return {
        ...encoded,
        result: { ...result, raw: { stdoutBytes: bytes.stdoutBytes, stderrBytes: bytes.stderrBytes } }
      }
    }
    default:
      return encoded
  }
}

/**
 * One SSE event. `data` is JSON (no raw newline), `event` is a tag: neither can break the framing.
 *
 * @internal
 */
export const frame = (id: number | undefined, event: string, data: unknown): string =>
  `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

/** A comment line: keeps proxies and clients from timing out an idle stream. @internal */
export const heartbeat = ": heartbeat\n\n"

/**
 * An SSE response's headers. `connection: close` ends its connection with its stream: a server
 * closing (Node ends only the connections idle when `close` is called) is then not held for its
 * keep-alive timeout by a connection whose stream ended after that. @internal
 */
export const headers = {
  "cache-control": "no-cache, no-transform",
  connection: "close",
  "x-accel-buffering": "no"
} as const
