/**
 * Accounting of request/response exchanges: whatever holds something for an exchange (a slot of
 * the concurrency bound, the in-flight count, an SDK server and transport) is released exactly
 * once, however the exchange ends.
 *
 * @internal
 */
import type * as Http from "node:http"
import type { Socket } from "node:net"

/**
 * One accepted TCP connection. A response queued behind another on a pipelined connection gets
 * no event of its own when the connection dies (Node emits `finish`/`close` only for the
 * response holding the socket), so the connection's `close` ends every exchange still open on it.
 *
 * @internal
 */
export interface Connection {
  /** Set once a refusal closes the connection; later pipelined requests are not dispatched. */
  closing: boolean
  /** The `end` of each exchange of this connection that has not ended yet. */
  readonly open: Set<() => void>
}

/** One request/response exchange; `onEnd` callbacks run once, however the exchange ends. @internal */
export interface Exchange {
  readonly onEnd: (callback: () => void) => void
}

/**
 * Tracks an exchange until it ends: its response is flushed (`finish`) or closed, or its
 * connection closes. Then `first` and every `onEnd` callback run, once each.
 *
 * @internal
 */
export const open = (connection: Connection, res: Http.ServerResponse, first: () => void): Exchange => {
  const callbacks: Array<() => void> = [first]
  let ended = false
  const end = () => {
    if (ended) return
    ended = true
    connection.open.delete(end)
    res.off("finish", end)
    res.off("close", end)
    for (const callback of callbacks) callback()
  }
  res.once("finish", end)
  res.once("close", end)
  connection.open.add(end)
  return {
    onEnd: (callback) => {
      if (ended) callback()
      else callbacks.push(callback)
    }
  }
}

/**
 * The connection of a socket, created on its first request: its `close` ends every exchange
 * still open on it.
 *
 * @internal
 */
export const connections = (): (socket: Socket) => Connection => {
  const bySocket = new WeakMap<Socket, Connection>()
  return (socket) => {
    const known = bySocket.get(socket)
    if (known !== undefined) return known
    const connection: Connection = { closing: false, open: new Set() }
    socket.once("close", () => {
      for (const end of [...connection.open]) end()
    })
    bySocket.set(socket, connection)
    return connection
  }
}
