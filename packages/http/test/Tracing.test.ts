/**
 * The thread key is in a thread route's path, which `@effect/platform`'s server span records
 * (`url.path`, `url.full`). docs/tracing.md tells a host serving with `server.serve(app)` to turn
 * that span off for the thread routes with `HttpMiddleware.withTracerDisabledWhenEffect`: checked
 * here on a real server with a recording tracer.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpRouter from "@effect/platform/HttpRouter"
import { expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { AgentHttp } from "@tether/http"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Tracer from "effect/Tracer"
import * as Http from "node:http"
import { authorize } from "./support.js"

const key = "alice/secret-key-7f3a"

/** Serves the router at `/agent` (with the docs' recipe or without) and makes two requests; the spans of the server. */
const spansOf = (recipe: boolean) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver: Reference.driver({ live: true }),
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    const spans: Array<Tracer.Span> = []
    const native = yield* Effect.tracer
    const recording = Tracer.make({
      span: (...args) => {
        const span = native.span(...args)
        spans.push(span)
        return span
      },
      context: native.context
    })
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
    const app = HttpRouter.empty.pipe(HttpRouter.mount("/agent", yield* AgentHttp.router({ agent, authorize })))
    const serve = server.serve(app).pipe(Effect.withTracer(recording))
    yield* recipe
      ? serve.pipe(HttpMiddleware.withTracerDisabledWhenEffect((request) => request.url.startsWith("/agent/threads/")))
      : serve
    const origin = `http://127.0.0.1:${(server.address as { readonly port: number }).port}`
    yield* Effect.promise(async () => {
      const thread = await fetch(`${origin}/agent/threads/${encodeURIComponent(key)}`, {
        headers: { authorization: "Bearer alice" }
      })
      expect(thread.status).toBe(404)
      const agui = await fetch(`${origin}/agent/agui`, { method: "POST" })
      expect(agui.status).toBe(401)
    })
    return spans.filter((span) => span.name.startsWith("http.server"))
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

const mentionsKey = (span: Tracer.Span) =>
  [...span.attributes.values()].some((value) => String(value).includes("secret-key-7f3a"))

it.live("withTracerDisabledWhenEffect around server.serve keeps thread keys out of the server's spans", () =>
  Effect.gen(function*() {
    // Without it the server span of the thread route records the key in its path.
    const plain = yield* spansOf(false)
    expect(plain.some(mentionsKey)).toBe(true)
    const kept = yield* spansOf(true)
    // The other routes are still traced; the thread routes are not.
    expect(kept.map((span) => span.attributes.get("url.path"))).toEqual(["/agent/agui"])
    expect(kept.some(mentionsKey)).toBe(false)
  }))
