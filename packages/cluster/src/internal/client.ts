/**
 * The host's side: a `RemoteThread` per key over the entity client, every call with a timeout.
 *
 * @internal
 */
import type * as Agent from "@tether/core/Agent"
import * as Unstable from "@tether/core/Unstable"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { randomUUID } from "node:crypto"
import * as ThreadEntity from "../ThreadEntity.js"
import { entityIdOf } from "./entityId.js"

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
          Effect.suspend(() => rpc.Run(request(turn, runOptions))).pipe(
            timed("run", deadline(runOptions)),
            Unstable.withSpan("RemoteThread.run", { attributes: keyAttribute })
          ),
        stream: (turn, runOptions) =>
          Stream.suspend(() => rpc.RunStream(request(turn, runOptions))).pipe(
            Stream.interruptWhen(
              Effect.zipRight(Effect.sleep(deadline(runOptions)), Effect.fail(expired("stream", deadline(runOptions))))
            ),
            Unstable.withStreamSpan("RemoteThread.stream", { attributes: keyAttribute })
          ),
        send: (input) => Effect.suspend(() => rpc.Send({ key, input })).pipe(timed("send", timeout)),
        cancel: (runId) =>
          Effect.suspend(() => rpc.Cancel({ key, ...(runId === undefined ? {} : { runId }) })).pipe(
            timed("cancel", timeout)
          ),
        approve: (id, decision) =>
          Effect.suspend(() => rpc.Approve({ key, id, decision })).pipe(timed("approve", timeout)),
        snapshot: Effect.suspend(() => rpc.Snapshot({ key })).pipe(timed("snapshot", timeout)),
        delete: Effect.suspend(() => rpc.Delete({ key })).pipe(timed("delete", timeout)),
        close: Effect.suspend(() => rpc.Close({ key })).pipe(timed("close", timeout))
      }
    }
    return { thread } satisfies ThreadEntity.Client
  })
