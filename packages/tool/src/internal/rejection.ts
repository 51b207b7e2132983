/**
 * Rejections: the only model-visible failure of a tool. Genuine rejections are recorded in
 * a module-private `WeakSet` when `reject` creates them; nothing else can enter it, so a
 * lookalike object, an error with the same fields, a subclass of the internal class or an
 * object sharing its prototype is never recognised.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"

/** @internal */
export interface Rejection extends Cause.YieldableError {
  readonly _tag: "Rejection"
  readonly code: string
  readonly message: string
}

/** @internal */
export const codePattern = /^[A-Za-z0-9_.-]{1,64}$/

/** @internal */
export const maxMessageLength = 4096

// Registration happens in `make` only, never in the constructor: constructing this class
// (directly, through a subclass or through a copied prototype) yields an unbranded value.
class RejectionError extends Data.TaggedError("Rejection")<{ readonly code: string; readonly message: string }> {}

const genuine = new WeakSet<object>()

/** @internal */
export const make = (code: string, message: string): Rejection => {
  const rejection = new RejectionError({ code, message })
  genuine.add(rejection)
  return rejection
}

/** @internal */
export const reject = (code: string, message: string): Effect.Effect<never, Rejection> =>
  Effect.suspend(() => Effect.fail(make(code, message)))

/** @internal */
export const isGenuine = (u: unknown): u is Rejection => typeof u === "object" && u !== null && genuine.has(u)

/** @internal */
export const isWellFormed = (rejection: Rejection): boolean =>
  typeof rejection.code === "string" && codePattern.test(rejection.code) &&
  typeof rejection.message === "string" && rejection.message.length <= maxMessageLength

const maxDepth = 32

// A getter or a Proxy trap may throw while the search reads a property: `search` contains
// that, so looking for a rejection never becomes a defect of its own.
const read = (u: object, key: PropertyKey): unknown => (u as Record<PropertyKey, unknown>)[key]

const search = (u: unknown, depth: number, seen: Set<unknown>): Rejection | undefined => {
  try {
    return searchIn(u, depth, seen)
  } catch {
    return undefined
  }
}

const searchIn = (u: unknown, depth: number, seen: Set<unknown>): Rejection | undefined => {
  if (depth > maxDepth || typeof u !== "object" || u === null || seen.has(u)) return undefined
  seen.add(u)
  if (genuine.has(u)) return u as Rejection
  // Effect wraps errors that fail inside a span in a Proxy that records the span; the
  // original instance behind it is what `make` registered.
  const original = Cause.originalError(u)
  if (original !== u && typeof original === "object" && original !== null && genuine.has(original)) {
    return original as Rejection
  }
  if (Cause.isCause(u)) {
    for (const failure of Cause.failures(u)) {
      const found = search(failure, depth + 1, seen)
      if (found !== undefined) return found
    }
    for (const defect of Cause.defects(u)) {
      const found = search(defect, depth + 1, seen)
      if (found !== undefined) return found
    }
    return undefined
  }
  if (Runtime.isFiberFailure(u)) {
    const found = search(read(u, Runtime.FiberFailureCauseId), depth + 1, seen)
    if (found !== undefined) return found
  }
  for (const key of ["cause", "error"] as const) {
    const found = search(read(u, key), depth + 1, seen)
    if (found !== undefined) return found
  }
  const errors = read(u, "errors")
  if (Array.isArray(errors)) {
    for (const error of errors) {
      const found = search(error, depth + 1, seen)
      if (found !== undefined) return found
    }
  }
  return undefined
}

/** @internal */
export const find = (u: unknown): Option.Option<Rejection> => Option.fromNullable(search(u, 0, new Set()))

/** @internal */
export const isRejection = (u: unknown): boolean => search(u, 0, new Set()) !== undefined
