/**
 * The host's side: a `RemoteThread` per key over the entity client, every call with a timeout.
 *
 * @internal
 */
import type * as Agent from "@tether/core/Agent"
import * as Unstable from "@tether/core/Unstable"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Mailbox from "effect/Mailbox"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import { randomUUID } from "node:crypto"
import * as ThreadEntity from "../ThreadEntity.js"
import { entityIdOf } from "./entityId.js"

/** The pause before a streamed turn whose runner stopped is delivered again. */
const redeliveryPause = Duration.millis(200)

/**
 * The names of `@effect/cluster`'s client span of each call to a thread (`tether/Thread.client.Run`,
 * `.RunStream`, `.Send`, ...): a child of `RemoteThread.*`, whose trace context reaches the runner.
 * A function: `ThreadEntity` imports this module, so `Thread` is not there yet when it loads.
 */
const isClientSpan = (name: string): boolean => name.startsWith(`${ThreadEntity.Thread.type}.client.`)

/**
 * The span itself (its ids, attributes, events, even `instanceof` its tracer's class), but it ends
 * with a content-free exit.
 */
const endingContentFree = (span: Tracer.Span): Tracer.Span =>
  new Proxy(span, {
    get: (target, property) => {
      if (property === "end") {
        return (endTime: bigint, exit: Exit.Exit<unknown, unknown>) =>
          target.end(endTime, Unstable.contentFreeExit(exit))
      }
      const value: unknown = Reflect.get(target, property)
      return typeof value === "function" ? (value as (...args: Array<unknown>) => unknown).bind(target) : value
    }
  })

// Per tracer, its scrubbing one (and each scrubbing tracer to itself: a call made where one is
// already in place, e.g. from a handler on an in-process runner, is not scrubbed twice).
const scrubbingTracers = new WeakMap<Tracer.Tracer, Tracer.Tracer>()

/** The tracer, but the client spans of thread calls it makes end content-free; others are its own. */
const scrubbing = (tracer: Tracer.Tracer): Tracer.Tracer => {
  const known = scrubbingTracers.get(tracer)
  if (known !== undefined) return known
  const scrubbed = Tracer.make({
    span: (name, parent, context, links, startTime, kind, options) => {
      const span = tracer.span(name, parent, context, links, startTime, kind, options)
      return isClientSpan(name) ? endingContentFree(span) : span
    },
    context: (execution, fiber) => tracer.context(execution, fiber)
  })
  scrubbingTracers.set(tracer, scrubbed).set(scrubbed, scrubbed)
  return scrubbed
}

/**
 * A call to the thread whose `@effect/cluster` client span ends content-free, as Tether's own spans
 * do (docs/tracing.md): that span ends with the call's exit, whose error may quote a provider's
 * text. The span still carries the trace context to the runner.
 */
const contentFreeCall = <A, E, R>(call: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tracerWith((tracer) => Effect.withTracer(call, scrubbing(tracer)))

/** @internal */
export const make = (options: ThreadEntity.ClientOptions = {}) =>
  Effect.gen(function*() {
    const clientFor = yield* ThreadEntity.Thread.client
    const timeout = Duration.decode(options.timeout ?? "30 seconds")
    const turnTimeout = Duration.decode(options.turnTimeout ?? "10 minutes")

    const thread = (key: string): ThreadEntity.RemoteThread => {
      const rpc = clientFor(entityIdOf(key))
      const expired = (operation: ThreadEntity.ThreadCallTimeout["operation"], duration: Duration.Duration) =>
        new ThreadEntity.ThreadCallTimeout({ key, operation, millis: Duration.toMillis(duration) })
      const timed =
        (operation: ThreadEntity.ThreadCallTimeout["operation"], duration: Duration.Duration) =>
        <A, E, R>(effect: Effect.Effect<A, E, R>) =>
          Effect.timeoutFail(effect, { duration, onTimeout: () => expired(operation, duration) })
      const request = (turn: Agent.Input, runOptions: ThreadEntity.RunOptions | undefined) => {
        const value: Agent.Turn = typeof turn === "string" ? { input: turn } : turn
        return {
          key,
          // Generated once per call: a redelivery of this turn carries the same id.
          id: value.id ?? randomUUID(),
          input: value.input,
          ...(value.model === undefined ? {} : { model: value.model }),
          ...(value.toolPolicy === undefined ? {} : { toolPolicy: value.toolPolicy }),
          ...(value.builtinTools === undefined ? {} : { builtinTools: value.builtinTools }),
          ...(runOptions?.resumeOnly === undefined ? {} : { resumeOnly: runOptions.resumeOnly })
        }
      }
      const deadline = (runOptions: ThreadEntity.RunOptions | undefined) =>
        runOptions?.timeout === undefined ? turnTimeout : Duration.decode(runOptions.timeout)
      // The key as traces carry it everywhere (docs/tracing.md): never the key itself.
      const keyAttribute = { "thread.key_hash": Unstable.threadKeyHash(key) }
      return {
        key,
        run: (turn, runOptions) =>
          contentFreeCall(Effect.suspend(() => rpc.Run(request(turn, runOptions)))).pipe(
            timed("run", deadline(runOptions)),
            Unstable.withSpan("RemoteThread.run", { attributes: keyAttribute })
          ),
        stream: (turn, runOptions) =>
          Stream.suspend(() => {
            // One turn id for every delivery of the turn: it commits once.
            const payload = request(turn, runOptions)
            // A runner that stops (SIGTERM: a deploy), or hands the thread's shard to a runner
            // that joined, ends the streams it serves with an interruption that is not this
            // caller's (the caller's own never reaches this handler): the call goes again, to the
            // thread's next runner, as it does when a runner dies.
            // As the RPC client makes the stream, but its client span is made (and ended, with the
            // stream's scope) under `contentFreeCall`.
            const call = () =>
              Stream.unwrapScoped(
                Effect.map(contentFreeCall(rpc.RunStream(payload, { asMailbox: true })), Mailbox.toStream)
              )
            const deliver = (): ReturnType<typeof call> =>
              call().pipe(
                Stream.catchAllCause((cause) =>
                  Cause.isInterruptedOnly(cause)
                    ? Stream.unwrap(Effect.as(Effect.sleep(redeliveryPause), Stream.suspend(deliver)))
                    : Stream.failCause(cause)
                )
              )
            return deliver()
          }).pipe(
            Stream.interruptWhen(
              Effect.zipRight(Effect.sleep(deadline(runOptions)), Effect.fail(expired("stream", deadline(runOptions))))
            ),
            Unstable.withStreamSpan("RemoteThread.stream", { attributes: keyAttribute })
          ),
        send: (input) => contentFreeCall(Effect.suspend(() => rpc.Send({ key, input }))).pipe(timed("send", timeout)),
        cancel: (runId) =>
          contentFreeCall(Effect.suspend(() => rpc.Cancel({ key, ...(runId === undefined ? {} : { runId }) }))).pipe(
            timed("cancel", timeout)
          ),
        approve: (id, decision) =>
          contentFreeCall(Effect.suspend(() => rpc.Approve({ key, id, decision }))).pipe(timed("approve", timeout)),
        snapshot: contentFreeCall(Effect.suspend(() => rpc.Snapshot({ key }))).pipe(timed("snapshot", timeout)),
        delete: contentFreeCall(Effect.suspend(() => rpc.Delete({ key }))).pipe(timed("delete", timeout)),
        close: contentFreeCall(Effect.suspend(() => rpc.Close({ key }))).pipe(timed("close", timeout))
      }
    }
    return { thread } satisfies ThreadEntity.Client
  })
