/**
 * The spans of turns served over HTTP (a real server on 127.0.0.1, the reference
 * driver live with a host tool), recorded by a tracer wrapping Effect's: an incoming
 * `traceparent` reaches the turn's `Run.execute` and its `Gateway.call`, every span ends (a run
 * canceled by DELETE, by a client that went away, a run of the AG-UI route), and no Tether span
 * (every span but the host's `http.server` ones) holds the thread key or the prompt.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { AgentHttp } from "@tether/http"
import { Harness, Reference } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Tracer from "effect/Tracer"
import * as Http from "node:http"
import { authorize, events, readUntil } from "./support.js"

const Echo = Tool.make("echo", {
  description: "Echo a text.",
  input: { text: Schema.String },
  output: Schema.Struct({ text: Schema.String }),
  revision: "echo/v1"
})
const EchoTools = Toolkit.make(Echo)
const EchoLive = EchoTools.toLayer({ echo: ({ text }) => Effect.succeed({ text }) })

const key = "alice/TRACE-KEY-41d2"
const prompt = "PROMPT-TEXT-9e1f"
const traceA = "0af7651916cd43dd8448eb211c80319c"
const traceB = "4bf92f3577b34da6a3ce929d0e0e4736"

const respond = (input: string): ReadonlyArray<Reference.Step> =>
  input.startsWith("hang")
    ? [{ _tag: "SessionStarted", sessionId: "s", model: "m" }, { _tag: "$hang" }]
    : [{ _tag: "$call", tool: "echo", input: { text: input } }, ...Reference.answer(`done ${input}`)]

const alice = { authorization: "Bearer alice", "content-type": "application/json" }

it.live(
  "turns over HTTP: traceparent reaches Run.execute and Gateway.call, every span ends, no key in Tether spans",
  () =>
    Effect.gen(function*() {
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
      yield* Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const agent = yield* Agent.make({
          driver: Reference.driver({ live: true, respond }),
          definition: { instructions: "", skills: [], tools: EchoTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          processes: { killGrace: "500 millis" }
        })
        const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
        yield* server.serve(
          yield* AgentHttp.router({
            agent,
            authorize,
            reconnectGrace: "200 millis",
            threads: { idleTimeout: "0 millis" }
          })
        )
        const origin = `http://127.0.0.1:${(server.address as { readonly port: number }).port}`
        const path = `/threads/${encodeURIComponent(key)}`
        yield* Effect.promise(async () => {
          // 1. A turn with a host tool call, under the caller's trace.
          const response = await fetch(`${origin}${path}/turns`, {
            method: "POST",
            headers: { ...alice, traceparent: `00-${traceA}-b7ad6b7169203331-01` },
            body: JSON.stringify({ input: prompt })
          })
          const frames = events(await readUntil(response))
          expect(frames.at(-1)!.data.outcome).toBe("success")
          // 2. A turn canceled by DELETE.
          const hanging = await fetch(`${origin}${path}/turns`, {
            method: "POST",
            headers: alice,
            body: JSON.stringify({ input: "hang one" })
          })
          const reader = hanging.body!.getReader()
          let text = ""
          while (!text.includes("event: RunStarted")) text += new TextDecoder().decode((await reader.read()).value)
          const runId = /"runId":"([^"]+)"/.exec(text)![1]!
          const deleted = await fetch(`${origin}${path}/runs/${runId}`, { method: "DELETE", headers: alice })
          expect(deleted.status).toBe(204)
          await reader.cancel()
          // 3. A turn whose client goes away (canceled after the grace).
          const abort = new AbortController()
          const gone = await fetch(`${origin}${path}/turns`, {
            method: "POST",
            headers: alice,
            body: JSON.stringify({ input: "hang two" }),
            signal: abort.signal
          })
          const goneReader = gone.body!.getReader()
          await goneReader.read()
          abort.abort()
          for (let i = 0; i < 100; i++) {
            const snapshot = await fetch(`${origin}${path}`, { headers: alice }).then((r) =>
              r.json() as Promise<{ readonly run?: string }>
            )
            if (snapshot.run === undefined) break
            await new Promise((resolve) => setTimeout(resolve, 50))
          }
          // 4. An AG-UI run, under another trace.
          const agui = await fetch(`${origin}/agui`, {
            method: "POST",
            headers: { ...alice, accept: "text/event-stream", traceparent: `00-${traceB}-00f067aa0ba902b7-01` },
            body: JSON.stringify({
              threadId: key,
              runId: "agui-run",
              messages: [{ id: "m1", role: "user", content: prompt }]
            })
          })
          expect(await agui.text()).toContain("RUN_FINISHED")
        })
        // Let the idle handle close (idleTimeout 0) before the scope closes.
        yield* Effect.sleep("500 millis")
      }).pipe(Effect.scoped, Effect.provide([EchoLive, Harness.layer]), Effect.withTracer(recording))

      const named = (name: string) => spans.filter((span) => span.name === name)
      const runs = named("Run.execute")
      const calls = named("Gateway.call")
      expect(runs).toHaveLength(4)
      expect(calls).toHaveLength(2)
      const sorted = [...runs].sort((a, b) => Number(a.status.startTime - b.status.startTime))
      // The caller's traces reach its runs and their tool calls.
      expect(sorted.map((span) => span.traceId)).toEqual([
        traceA,
        expect.not.stringMatching(traceA),
        expect.not.stringMatching(traceA),
        traceB
      ])
      expect(calls.map((call) => call.traceId).sort()).toEqual([traceA, traceB].sort())
      expect(sorted.map((span) => span.attributes.get("run.outcome"))).toEqual([
        "success",
        "canceled",
        "canceled",
        "success"
      ])
      // Every span ended.
      const open = spans.filter((span) => span.status._tag !== "Ended").map((span) => span.name)
      expect(open).toEqual([])
      // No Tether span holds the key or the prompt, in its attributes, events or exit.
      const texts = (span: Tracer.Span) => [
        ...[...span.attributes.values()].map(String),
        ...(span as unknown as { events: Array<[string, bigint, Record<string, unknown>]> }).events.flatMap((
          [name, , attributes]
        ) => [name, ...Object.values(attributes).map(String)]),
        span.status._tag === "Ended" && span.status.exit._tag === "Failure" ? String(span.status.exit.cause) : ""
      ]
      const leaking = spans
        .filter((span) => !span.name.startsWith("http.server"))
        .filter((span) => texts(span).some((text) => text.includes("TRACE-KEY") || text.includes("PROMPT-TEXT")))
        .map((span) => span.name)
      expect(leaking).toEqual([])
    }),
  60_000
)
