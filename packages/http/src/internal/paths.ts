/**
 * The thread routes' paths, matched here rather than by the router's path parameters: a thread
 * key is the host's opaque string, of any length (find-my-way's parameters stop at 100
 * characters), and a path that does not match or does not decode still gets a JSON error.
 *
 * @internal
 */

/** A request to one of the thread routes (its segments percent-decoded). @internal */
export type ThreadRoute =
  | { readonly _tag: "Snapshot"; readonly key: string }
  | { readonly _tag: "Turn"; readonly key: string }
  | { readonly _tag: "Events"; readonly key: string; readonly run: string }
  | { readonly _tag: "Cancel"; readonly key: string; readonly run: string }
  | { readonly _tag: "Input"; readonly key: string; readonly run: string }
  | { readonly _tag: "Approval"; readonly key: string; readonly run: string; readonly id: string }

/** What a request under `/threads` is: a route, no route, or a path that does not decode. @internal */
export type Match = ThreadRoute | { readonly _tag: "NoRoute" } | { readonly _tag: "Malformed" }

const noRoute: Match = { _tag: "NoRoute" }
const malformed: Match = { _tag: "Malformed" }

const decode = (segment: string): string | undefined => {
  try {
    return decodeURIComponent(segment)
  } catch {
    return undefined
  }
}

/**
 * Matches `url`, relative to the `/threads` mount (`/<key>`, `/<key>/turns`,
 * `/<key>/runs/<run>/events`, `/<key>/runs/<run>`, `/<key>/runs/<run>/input`,
 * `/<key>/runs/<run>/approvals/<id>`, each
 * segment percent-encoded, the key not empty), with its method.
 *
 * @internal
 */
export const match = (method: string, url: string): Match => {
  const query = url.indexOf("?")
  const segments = (query === -1 ? url : url.slice(0, query)).split("/").slice(1)
  if (segments.length === 0 || segments[0] === "") return noRoute
  const get = method === "GET" || method === "HEAD"
  const [, a, run, b, id] = segments
  let shape: "Snapshot" | "Turn" | "Events" | "Cancel" | "Input" | "Approval" | undefined
  if (segments.length === 1 && get) shape = "Snapshot"
  else if (segments.length === 2 && a === "turns" && method === "POST") shape = "Turn"
  else if (a === "runs" && run !== "") {
    if (segments.length === 3 && method === "DELETE") shape = "Cancel"
    else if (segments.length === 4 && b === "events" && get) shape = "Events"
    else if (segments.length === 4 && b === "input" && method === "POST") shape = "Input"
    else if (segments.length === 5 && b === "approvals" && id !== "" && method === "POST") shape = "Approval"
  }
  if (shape === undefined) return noRoute
  const decoded = segments.map(decode)
  if (decoded.some((segment) => segment === undefined)) return malformed
  const [key, , runId, , approvalId] = decoded as Array<string>
  switch (shape) {
    case "Snapshot":
    case "Turn":
      return { _tag: shape, key: key! }
    case "Events":
    case "Cancel":
    case "Input":
      return { _tag: shape, key: key!, run: runId! }
    case "Approval":
      return { _tag: shape, key: key!, run: runId!, id: approvalId! }
  }
}
