/**
 * @tether/gateway overhead: a trivial tool called by the official SDK client
 * (StreamableHTTPClientTransport) through
 * - the gateway (Host/Origin/bearer/limits in front of a fresh SDK server per request),
 * - a bare SDK stateless JSON-response server with the same handler (the baseline): the same
 *   Effect executor run with `Effect.runPromise`, its outcome mapped to a CallToolResult,
 * - for information, the same bare server given one shared Ajv validator (the SDK builds an Ajv
 *   instance per `Server` otherwise; the gateway shares one), so the gateway's own cost shows,
 * - a plain node:http JSON echo called with fetch (the floor),
 * measured in the same process, round-robin (latency) and in alternating bursts (throughput)
 * so that load from other processes weighs on every target alike.
 * Targets: p50 at concurrency 1 ≤ 0.85× bare SDK; throughput at concurrency 32 ≥ 1.25× bare SDK.
 * The gateway's per-call log line goes to a no-op logger (built, not written).
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/gateway.ts
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import { Gateway } from "@tether/gateway"
import type * as Catalog from "@tether/tool/Catalog"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Os from "node:os"
import * as NodePath from "node:path"

export interface Row {
  readonly name: string
  readonly p50Ms: number
  readonly p99Ms: number
  readonly callsPerSecond: number
}

export interface GatewayFigures {
  readonly gateway: Row
  readonly bareSdk: Row
  /** Informational: the bare server given one shared schema validator, as the gateway does. */
  readonly bareSdkSharedValidator: Row
  readonly floor: Row
  readonly p50Ratio: number
  readonly throughputRatio: number
  readonly p50Pass: boolean
  readonly throughputPass: boolean
  readonly settings: { readonly latencyCalls: number; readonly bursts: number; readonly perBurst: number }
  /** 1-minute load average before and after, and the core count: other processes skew figures. */
  readonly machine: { readonly loadBefore: number; readonly loadAfter: number; readonly cores: number }
}

// The trivial tool, shared by the gateway executor and the bare SDK handler.
const echo = (input: unknown) => {
  const text = typeof input === "object" && input !== null ? String((input as { text?: unknown }).text) : ""
  return { structuredContent: { text }, text: JSON.stringify({ text }) }
}

const schema = { type: "object", properties: { text: { type: "string" } }, required: ["text"] }

const executor: Catalog.Executor = {
  catalog: {
    descriptors: [{
      name: "echo",
      title: undefined,
      description: "Echo the text.",
      inputSchema: schema,
      outputSchema: schema,
      annotations: {},
      revision: undefined
    }],
    fingerprint: "bench"
  },
  execute: (_name, input) => Effect.sync(() => ({ _tag: "Success" as const, ...echo(input) }))
}

const readJson = (req: Http.IncomingMessage): Promise<unknown> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")))
      } catch (error) {
        reject(error)
      }
    })
    req.on("error", reject)
  })

const listen = (server: Http.Server): Promise<number> =>
  new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)))

const close = (server: Http.Server): Promise<void> =>
  new Promise((resolve) => {
    server.close(() => resolve())
    server.closeAllConnections()
  })

/** The baseline: the SDK's documented stateless JSON-response server, same handler. */
const bareSdkServer = (validator?: AjvJsonSchemaValidator) =>
  Http.createServer((req, res) => {
    // As in the SDK's stateless example: only POST (the client's optional SSE GET gets 405).
    if (req.method !== "POST") return void res.writeHead(405).end()
    readJson(req).then(async (body) => {
      const server = new Server(
        { name: "bare", version: "1.0.0" },
        { capabilities: { tools: {} }, ...(validator === undefined ? {} : { jsonSchemaValidator: validator }) }
      )
      server.setRequestHandler(ListToolsRequestSchema, () => ({
        tools: [{ name: "echo", description: "Echo the text.", inputSchema: schema, outputSchema: schema }]
      }))
      // The same handler: the tool's executor, run as an Effect, its outcome mapped as the gateway does.
      server.setRequestHandler(CallToolRequestSchema, (request) =>
        Effect.runPromise(executor.execute(request.params.name, request.params.arguments)).then((outcome) =>
          outcome._tag === "Success"
            ? { content: [{ type: "text" as const, text: outcome.text }], structuredContent: outcome.structuredContent }
            : { content: [{ type: "text" as const, text: `${outcome.code}: ${outcome.message}` }], isError: true }
        ))
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true })
      res.on("close", () => {
        void transport.close()
        void server.close()
      })
      await server.connect(transport)
      await transport.handleRequest(req, res, body)
    }, () =>
      res.writeHead(400).end())
  })

/** The floor: parse a JSON body, answer JSON. */
const floorServer = () =>
  Http.createServer((req, res) => {
    readJson(req).then((body) => {
      const out = JSON.stringify({ echo: body })
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(out) })
      res.end(out)
    }, () => res.writeHead(400).end())
  })

type Call = () => Promise<unknown>

const sdkCaller = async (url: string, token?: string): Promise<{ call: Call; close: () => Promise<void> }> => {
  const client = new Client({ name: "bench", version: "1.0.0" })
  await client.connect(
    new StreamableHTTPClientTransport(
      new URL(url),
      token === undefined ? {} : { requestInit: { headers: { Authorization: `Bearer ${token}` } } }
    )
  )
  await client.listTools()
  let i = 0
  return {
    call: () =>
      client.callTool({ name: "echo", arguments: { text: `t${i++}` } }).then((r) => {
        if (r.isError) return Promise.reject(new Error("tool error"))
        return r
      }),
    close: () => client.close()
  }
}

const fetchCaller = (url: string): { call: Call; close: () => Promise<void> } => {
  let i = 0
  return {
    call: () =>
      fetch(url, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: i,
          method: "tools/call",
          params: { arguments: { text: `t${i++}` } }
        })
      }).then((r) => r.json()),
    close: () => Promise.resolve()
  }
}

/** Sequential calls, one target after the other per step, so load swings hit all alike. */
const interleavedLatencies = async (calls: ReadonlyArray<Call>, n: number): Promise<Array<Array<number>>> => {
  const out = calls.map(() => [] as Array<number>)
  for (let i = 0; i < n; i++) {
    for (const [k, call] of calls.entries()) {
      const start = performance.now()
      await call()
      out[k]!.push(performance.now() - start)
    }
  }
  return out
}

/** `n` calls at `concurrency`; returns the elapsed milliseconds. */
const burst = async (call: Call, n: number, concurrency: number): Promise<number> => {
  let next = 0
  const start = performance.now()
  const lane = async () => {
    while (next < n) {
      next++
      await call()
    }
  }
  await Promise.all(Array.from({ length: concurrency }, lane))
  return performance.now() - start
}

/** Alternating bursts per target; calls per second from the summed time of each target. */
const interleavedThroughput = async (
  calls: ReadonlyArray<Call>,
  bursts: number,
  perBurst: number,
  concurrency: number
): Promise<Array<number>> => {
  const elapsed = calls.map(() => 0)
  for (let b = 0; b < bursts; b++) {
    const order = b % 2 === 0 ? [...calls.keys()] : [...calls.keys()].reverse()
    for (const k of order) elapsed[k]! += await burst(calls[k]!, perBurst, concurrency)
  }
  return elapsed.map((ms) => (bursts * perBurst) / (ms / 1000))
}

const quantile = (values: ReadonlyArray<number>, q: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

/** Measures the figures above in one process, calls and bursts interleaved across targets. */
export const measure = (
  options: {
    readonly latencyCalls?: number
    readonly bursts?: number
    readonly perBurst?: number
    readonly warmUpCalls?: number
  } = {}
): Effect.Effect<GatewayFigures> =>
  Effect.gen(function*() {
    const loadBefore = Os.loadavg()[0]!
    const latencyCalls = options.latencyCalls ?? 800
    const bursts = options.bursts ?? 16
    const perBurst = options.perBurst ?? 128
    const scope = yield* Scope.make()
    const gateway = yield* Gateway.make().pipe(Scope.extend(scope))
    const registration = yield* gateway.register(executor).pipe(Scope.extend(scope), Effect.orDie)
    const bare = bareSdkServer()
    const bareShared = bareSdkServer(new AjvJsonSchemaValidator())
    const floor = floorServer()
    const barePort = yield* Effect.promise(() => listen(bare))
    const bareSharedPort = yield* Effect.promise(() => listen(bareShared))
    const floorPort = yield* Effect.promise(() => listen(floor))
    const figures = yield* Effect.promise(async () => {
      const targets = [
        await sdkCaller(registration.url, Redacted.value(registration.token)),
        await sdkCaller(`http://127.0.0.1:${barePort}/mcp`),
        await sdkCaller(`http://127.0.0.1:${bareSharedPort}/mcp`),
        fetchCaller(`http://127.0.0.1:${floorPort}/`)
      ] as const
      const calls = targets.map((t) => t.call)
      for (const call of calls) await burst(call, options.warmUpCalls ?? 300, 8) // warm-up
      const samples = await interleavedLatencies(calls, latencyCalls)
      const rates = await interleavedThroughput(calls, bursts, perBurst, 32)
      for (const target of targets) await target.close()
      const row = (k: number, name: string): Row => ({
        name,
        p50Ms: quantile(samples[k]!, 0.5),
        p99Ms: quantile(samples[k]!, 0.99),
        callsPerSecond: rates[k]!
      })
      return {
        gateway: row(0, "gateway"),
        bareSdk: row(1, "bare SDK stateless"),
        bareSdkSharedValidator: row(2, "bare SDK, shared Ajv"),
        floor: row(3, "node:http JSON echo")
      }
    })
    yield* Effect.promise(() => close(bare))
    yield* Effect.promise(() => close(bareShared))
    yield* Effect.promise(() => close(floor))
    yield* Scope.close(scope, Exit.void)
    const p50Ratio = figures.gateway.p50Ms / figures.bareSdk.p50Ms
    const throughputRatio = figures.gateway.callsPerSecond / figures.bareSdk.callsPerSecond
    return {
      ...figures,
      p50Ratio,
      throughputRatio,
      p50Pass: p50Ratio <= 0.85,
      throughputPass: throughputRatio >= 1.25,
      settings: { latencyCalls, bursts, perBurst },
      machine: { loadBefore, loadAfter: Os.loadavg()[0]!, cores: Os.cpus().length }
    }
  }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, Logger.none)))

/** The figures; `judge: false` (CI's short run) leaves out the verdicts. */
export const format = (f: GatewayFigures, judge = true): string => {
  const pad = (s: string, n: number) => s.padEnd(n)
  const num = (x: number, d = 2) => x.toFixed(d)
  const rows = [f.gateway, f.bareSdk, f.bareSdkSharedValidator, f.floor].map((r) =>
    `${pad(r.name, 22)}${pad(num(r.p50Ms, 3), 10)}${pad(num(r.p99Ms, 3), 10)}${pad(num(r.callsPerSecond, 0), 12)}${
      num(r.p50Ms / f.bareSdk.p50Ms)
    }× / ${num(r.callsPerSecond / f.bareSdk.callsPerSecond)}×`
  )
  return [
    `gateway bench: ${f.settings.latencyCalls} sequential calls per target (round-robin across targets); ` +
    `${f.settings.bursts} alternating bursts of ${f.settings.perBurst} calls at concurrency 32 per target`,
    `machine: ${f.machine.cores} cores, 1-min load average ${num(f.machine.loadBefore)} → ${num(f.machine.loadAfter)}`,
    `${pad("target", 22)}${pad("p50 ms", 10)}${pad("p99 ms", 10)}${pad("calls/s@32", 12)}vs bare SDK (p50 / calls/s)`,
    ...rows,
    `p50 ratio ${num(f.p50Ratio)}× (target ≤ 0.85×)${judge ? `: ${f.p50Pass ? "pass" : "miss"}` : ""}`,
    `throughput ratio ${num(f.throughputRatio)}× (target ≥ 1.25×)${
      judge ? `: ${f.throughputPass ? "pass" : "miss"}` : ""
    }`
  ].join("\n")
}

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(NodePath.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measure()).then((figures) => process.stdout.write(`${format(figures)}\n`))
}
