import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import type * as Catalog from "@tether/tool/Catalog"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { makeExecutor } from "./fixtures/executors.js"
import { connect, expectNoTokenInLogs, logLayer, portOf, remember } from "./fixtures/harness.js"
import { callBody, connectionRefused, rawRequest } from "./fixtures/raw.js"

const authHeaders = (url: string, token: string) =>
  [
    ["Host", `127.0.0.1:${portOf(url)}`],
    ["Content-Type", "application/json"],
    ["Accept", "application/json, text/event-stream"],
    ["Authorization", `Bearer ${token}`]
  ] as const

const live = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => effect.pipe(Effect.scoped, Effect.provide(logLayer))

describe("Listener lifecycle", () => {
  it.live("the listener closes with the last registration and starts again on the next", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor } = yield* makeExecutor("a")
      const first = yield* Scope.make()
      const registration = yield* gateway.register(executor).pipe(Scope.extend(first))
      remember(registration.token)
      yield* Scope.close(first, Exit.void)
      expect(yield* connectionRefused(portOf(registration.url))).toBe(true)
      const again = yield* gateway.register(executor)
      remember(again.token)
      const client = yield* connect(again.url, again.token)
      expect((yield* Effect.promise(() => client.callTool({ name: "echo", arguments: { text: "y" } }))).isError)
        .toBeFalsy()
    })))

  it.live("closing the layer answers in-flight calls, then refuses connections", () =>
    Effect.gen(function*() {
      const { executor, recorder } = yield* makeExecutor("a")
      const layerScope = yield* Scope.make()
      const gateway = yield* Gateway.make().pipe(Scope.extend(layerScope))
      const registration = yield* gateway.register(executor).pipe(Scope.extend(layerScope))
      const token = remember(registration.token)
      const port = portOf(registration.url)
      const pending = yield* Effect.fork(rawRequest(port, {
        headers: authHeaders(registration.url, token),
        body: callBody("block")
      }))
      yield* Deferred.await(recorder.started)
      yield* Scope.close(layerScope, Exit.void)
      const response = yield* Fiber.join(pending)
      expect(JSON.parse(response.body).error.message).toBe("MCP error -32603: canceled")
      expect(yield* connectionRefused(port)).toBe(true)
    }).pipe(Effect.provide(logLayer)))
})

describe("Listener shutdown", () => {
  it.live("closing the layer cancels calls of registrations that outlive it", () =>
    Effect.gen(function*() {
      const { executor, recorder } = yield* makeExecutor("a")
      const layerScope = yield* Scope.make()
      const registrationScope = yield* Scope.make()
      const gateway = yield* Gateway.make().pipe(Scope.extend(layerScope))
      const registration = yield* gateway.register(executor).pipe(Scope.extend(registrationScope))
      const token = remember(registration.token)
      const port = portOf(registration.url)
      const pending = yield* Effect.fork(
        rawRequest(port, { headers: authHeaders(registration.url, token), body: callBody("block") })
      )
      yield* Deferred.await(recorder.started)
      yield* Scope.close(layerScope, Exit.void)
      const response = yield* Fiber.join(pending)
      expect(JSON.parse(response.body).error.message).toBe("MCP error -32603: canceled")
      expect(recorder.interrupted).toBe(1)
      expect(yield* connectionRefused(port)).toBe(true)
      yield* Scope.close(registrationScope, Exit.void)
    }).pipe(Effect.provide(logLayer)))

  for (const closed of ["the layer", "the registration"] as const) {
    it.live(
      `closing ${closed} is bounded by closeTimeout when a handler ignores interruption`,
      () =>
        Effect.gen(function*() {
          const started = yield* Deferred.make<void>()
          // Released at the end, so nothing stays suspended in the worker.
          const release = yield* Deferred.make<void>()
          const { executor } = yield* makeExecutor("a")
          const stubborn: Catalog.Executor = {
            ...executor,
            execute: () =>
              Deferred.succeed(started, undefined).pipe(
                Effect.zipRight(Deferred.await(release)),
                Effect.uninterruptible,
                Effect.as<Catalog.Outcome>({ _tag: "Success", text: "late" })
              )
          }
          const layerScope = yield* Scope.make()
          const registrationScope = yield* Scope.make()
          const gateway = yield* Gateway.make({ closeTimeout: "300 millis" }).pipe(Scope.extend(layerScope))
          const registration = yield* gateway.register(stubborn).pipe(Scope.extend(registrationScope))
          const token = remember(registration.token)
          const port = portOf(registration.url)
          const pending = yield* Effect.fork(
            rawRequest(port, { headers: authHeaders(registration.url, token), body: callBody("echo") })
          )
          yield* Deferred.await(started)
          // Either way the listener stops: the layer's close, or the last registration's.
          const closing = yield* Effect.fork(
            Scope.close(closed === "the layer" ? layerScope : registrationScope, Exit.void)
          )
          const ended = yield* Fiber.await(closing).pipe(Effect.timeoutOption("3 seconds"))
          const answer = yield* Fiber.join(pending).pipe(Effect.timeoutOption("1 second"))
          const refused = yield* connectionRefused(port)
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.await(closing)
          yield* Scope.close(registrationScope, Exit.void)
          yield* Scope.close(layerScope, Exit.void)
          expect({
            ended: ended._tag,
            answer: answer._tag === "Some" ? JSON.parse(answer.value.body).error.message : "none",
            refused
          }).toEqual({ ended: "Some", answer: "MCP error -32603: canceled", refused: true })
        }).pipe(Effect.provide(logLayer)),
      15_000
    )
  }

  it.live("closing a registration revokes the turn credentials it minted", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const keep = yield* makeExecutor("keep")
      yield* gateway.register(keep.executor)
      const { executor } = yield* makeExecutor("a")
      const registrationScope = yield* Scope.make()
      const registration = yield* gateway.register(executor).pipe(Scope.extend(registrationScope))
      remember(registration.token)
      const credential = yield* registration.credential({ tools: ["echo"] })
      const turnToken = remember(credential.token)
      const ok = yield* rawRequest(portOf(registration.url), {
        headers: authHeaders(registration.url, turnToken),
        body: callBody("echo")
      })
      expect(ok.status).toBe(200)
      yield* Scope.close(registrationScope, Exit.void)
      const revoked = yield* rawRequest(portOf(registration.url), {
        headers: authHeaders(registration.url, turnToken),
        body: callBody("echo")
      })
      expect(revoked.status).toBe(401)
    })))

  it.live(
    "after the gateway closes, with a keep-alive client still open, no handle keeps the process alive",
    () =>
      Effect.gen(function*() {
        const child = ChildProcess.spawn(
          process.execPath,
          ["--conditions=@tether/source", "--import", "tsx", Path.join(import.meta.dirname, "fixtures/closeChild.ts")],
          { stdio: ["ignore", "pipe", "pipe"] }
        )
        let stdout = ""
        let stderr = ""
        child.stdout.on("data", (chunk) => stdout += String(chunk))
        child.stderr.on("data", (chunk) => stderr += String(chunk))
        const code = yield* Effect.async<number | null>((resume) => {
          child.once("exit", (code) => resume(Effect.succeed(code)))
        }).pipe(
          Effect.timeoutTo({ duration: "20 seconds", onTimeout: () => "hung" as const, onSuccess: (code) => code }),
          Effect.ensuring(Effect.sync(() => child.kill("SIGKILL")))
        )
        expect({ code, stderr }).toEqual({ code: 0, stderr: "" })
        expect(stdout).toBe(`called {"text":"child","owner":"child"}\nclosed\ndone\n`)
      }),
    30_000
  )
})

afterAll(() => expectNoTokenInLogs())
