/**
 * Request bodies: JSON of at most the router's limit. A body over the limit is answered `413` at
 * once, while a fiber of the router reads and discards the rest of it for a bounded time: a
 * connection closed with input still unread is reset, and a reset can take the answer with it
 * (and a `connection: close` answer makes Node close it at once). A body still arriving when that
 * time is up has its connection closed then.
 *
 * @internal
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Stream from "effect/Stream"
import * as Failure from "./failure.js"
import type { HttpFailure } from "./failure.js"

/**
 * How long the rest of an oversized body is read (and dropped) after its `413`, at most.
 *
 * @internal
 */
export const drainTime: Duration.Duration = Duration.seconds(5)

/**
 * Awaits `deferred`, which `fiber` (run in the router's fibers) completes. Once the router's scope
 * closed, that set interrupts a fiber before it runs, or while it runs: the fiber then ends
 * without completing it, and the request is answered `503 agent_closed` instead of waiting forever.
 *
 * @internal
 */
export const awaitFrom = <A>(
  deferred: Deferred.Deferred<A, HttpFailure>,
  fiber: Fiber.RuntimeFiber<unknown, unknown>
): Effect.Effect<A, HttpFailure> =>
  Effect.raceFirst(
    Deferred.await(deferred),
    Fiber.await(fiber).pipe(
      Effect.zipRight(Deferred.fail(deferred, Failure.agentClosed)),
      Effect.zipRight(Deferred.await(deferred))
    )
  )

/**
 * Reads the request's JSON body: fails `413` as soon as the body is (or is declared) larger than
 * `maxBodyBytes`, `400 invalid_request` when the body cannot be read, `400 invalid_json` when it
 * does not parse. The body is read in a fiber of `fibers` (the router's), which outlives a `413`
 * to drain the rest for up to `drainTime`; a request that goes away before its body was read
 * stops it.
 *
 * @internal
 */
export const readJson = (options: {
  readonly maxBodyBytes: number
  readonly fibers: FiberSet.FiberSet<void, never>
}): Effect.Effect<unknown, HttpFailure, HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const type = request.headers["content-type"] ?? ""
    if (!/^application\/json\s*(;|$)/i.test(type)) return yield* Failure.unsupportedMediaType
    const max = options.maxBodyBytes
    const result = yield* Deferred.make<Buffer, HttpFailure>()
    // A declared length over the limit is answered before anything is read.
    const declared = request.headers["content-length"]
    if (declared !== undefined && Number(declared) > max) yield* Deferred.fail(result, Failure.bodyTooLarge)
    const chunks: Array<Uint8Array> = []
    let size = 0
    const reading = request.stream.pipe(
      Stream.mapError(() => Failure.invalidRequest),
      Stream.runForEach((chunk) => {
        size += chunk.length
        if (size <= max) {
          chunks.push(chunk)
          return Effect.void
        }
        if (size - chunk.length > max) return Effect.void
        // Over the limit: answered now; the rest is read and dropped.
        chunks.length = 0
        return Effect.asVoid(Deferred.fail(result, Failure.bodyTooLarge))
      }),
      Effect.matchEffect({
        onFailure: (failure) => Deferred.fail(result, failure),
        onSuccess: () =>
          size > max ? Deferred.fail(result, Failure.bodyTooLarge) : Deferred.succeed(result, Buffer.concat(chunks))
      }),
      Effect.asVoid
    )
    // Once answered, the rest is read for a bounded time; then the reading (and the connection) ends.
    const drain = Effect.raceFirst(
      reading,
      Deferred.await(result).pipe(Effect.ignore, Effect.zipRight(Effect.sleep(drainTime)))
    )
    const fiber = yield* FiberSet.run(options.fibers, Effect.interruptible(drain))
    const bytes = yield* awaitFrom(result, fiber).pipe(Effect.onInterrupt(() => Fiber.interrupt(fiber)))
    return yield* Effect.try({
      try: () => JSON.parse(bytes.toString("utf8")) as unknown,
      catch: () => Failure.invalidJson
    })
  })
