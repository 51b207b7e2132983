/**
 * The ACP turn runner: the program a one-shot turn of the ACP driver runs (`acpDriver.ts`). It
 * reads the turn's spec on stdin, spawns the agent as its child (same process group: core's
 * group kill reaches both), drives one turn with Tether's ACP client (`acp.ts`), relays every
 * line the agent prints to its own stdout unchanged (the driver's `parse` reads them), then ends
 * the agent: stdin closed, SIGTERM, SIGKILL after a grace (ACP adapters do not exit at EOF).
 *
 * The hosted token is read from the variable the spec names and removed from the agent's
 * environment: it goes to the agent only inside `session/new`, or (`headerSecrets: "environment"`)
 * under the session token variable that `session/new`'s header references. A turn that could not run ends
 * with one stderr line `tether-acp-turn: <reason>: <detail>` and exit code 2. Permission requests
 * for the hosted tools are allowed when the driver's naming is one of the known ones (the spec
 * names it: a function cannot be passed). All others are asked of core's approvals when the run
 * has them (`request.approvals`): the runner calls the run's approver tool on the gateway with the
 * official MCP client, on the approver's own per-process token (also kept from the agent), and
 * the ACP client maps the decision onto the offered options as on a live session. Without
 * approvals they are denied.
 *
 * @internal
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as Approval from "@tether/core/Approval"
import type * as Driver from "@tether/core/Driver"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { spawn } from "node:child_process"
import * as Readline from "node:readline"
import * as Acp from "./acp.js"
import * as AcpApproval from "./acpApproval.js"
import { failurePrefix, type TurnSpec } from "./acpDriver.js"
import * as AcpMap from "./acpMap.js"

const noHostedTools: AcpMap.Naming = (call) => ({ name: call.name ?? call.title ?? "", source: "builtin" })

const readStdin = Effect.async<string>((resume) => {
  const parts: Array<Buffer> = []
  process.stdin.on("data", (chunk: Buffer) => parts.push(chunk))
  process.stdin.on("end", () => resume(Effect.succeed(Buffer.concat(parts).toString("utf8"))))
})

const reveal = (frame: Driver.SecretFrame): string =>
  frame.secrets.reduce((text, secret) => text.split(secret.placeholder).join(Redacted.value(secret.value)), frame.text)

/**
 * `LiveContext.approve` for a one-shot turn: each ask is a call of the run's approver tool on the
 * gateway (one MCP client, connected at the first ask, closed with the scope). The wait is bounded
 * by core's approvals (their deadline answers), not by the client; a call that fails is a deny.
 */
const approverOf = (approvals: NonNullable<Driver.InvocationRequest["approvals"]>, token: string) =>
  Effect.gen(function*() {
    let connected: Promise<Client> | undefined = undefined
    const connect = (): Promise<Client> =>
      connected ??= (async () => {
        const client = new Client({ name: "tether-acp-turn", version: "0.1.0" })
        await client.connect(
          new StreamableHTTPClientTransport(new URL(approvals.url), {
            requestInit: { headers: { Authorization: `Bearer ${token}` } }
          })
        )
        return client
      })()
    yield* Effect.addFinalizer(() =>
      connected === undefined ? Effect.void : Effect.promise(() => connected!.then((c) => c.close(), () => undefined))
    )
    const ask = (fields: Driver.ApprovalAsk) =>
      Effect.tryPromise(async () => {
        const client = await connect()
        const result = await client.callTool(
          { name: approvals.tool, arguments: { ...fields } },
          undefined,
          { timeout: maxTimer }
        )
        const blocks = Array.isArray(result.content) ? result.content : []
        const text = blocks.flatMap((block) => block.type === "text" ? [block.text] : []).join("")
        if (result.isError === true) throw new Error(text)
        const decision = AcpApproval.decisionOf(text)
        if (decision === undefined) throw new Error(`not a decision: ${text.slice(0, 200)}`)
        return decision
      })
    return (fields: Driver.ApprovalAsk): Effect.Effect<Approval.Decision> =>
      ask(fields).pipe(
        Effect.catchAll((error) =>
          Effect.succeed(
            Approval.deny(
              `The approval could not be asked (${
                error.error instanceof Error ? error.error.message : "unknown failure"
              }): the action was not run.`
            )
          )
        )
      )
  })

/** The longest timer Node keeps (about 24.8 days): the client never gives up before core's deadline. */
const maxTimer = 2 ** 31 - 1

const program = Effect.gen(function*() {
  const spec = JSON.parse(yield* readStdin) as TurnSpec
  const tokenVariable = spec.request.hosted.tokenVariable
  const token = process.env[tokenVariable] ?? ""
  const approvals = spec.request.approvals
  // Both tokens stay with the runner: the agent gets the hosted one inside `session/new` (or, with
  // `headerSecrets: "environment"`, under the session token variable its headers reference) and
  // never the approver's.
  const sessionVariable = Acp.sessionTokenVariable(tokenVariable)
  const kept = new Set([
    tokenVariable,
    sessionVariable,
    ...(approvals === undefined ? [] : [approvals.tokenVariable])
  ])
  const env: { [name: string]: string } = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && !kept.has(name)) env[name] = value
  }
  if (spec.headerSecrets === "environment") env[sessionVariable] = token
  const child = yield* Effect.acquireRelease(
    Effect.sync(() => spawn(spec.command, [...spec.args], { cwd: spec.request.workspace, env, stdio: "pipe" })),
    (child) =>
      Effect.async<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.stdin.end()
        const kill = setTimeout(() => child.kill("SIGKILL"), 1500)
        child.once("exit", () => {
          clearTimeout(kill)
          resume(Effect.void)
        })
        child.kill("SIGTERM")
      })
  )
  const spawned = yield* Deferred.make<void, string>()
  child.once("spawn", () => Deferred.unsafeDone(spawned, Exit.void))
  child.once(
    "error",
    (error) => Deferred.unsafeDone(spawned, Exit.fail(`cannot start ${spec.command}: ${error.message}`))
  )
  child.stderr.pipe(process.stderr)
  // An agent that exited at once closes its stdin: a write to it (`initialize`) then fails with
  // EPIPE, which must not crash the runner (the closed output ends the turn, with the agent's
  // stderr above the runner's failure line).
  child.stdin.on("error", () => {})
  yield* Deferred.await(spawned).pipe(
    Effect.mapError((detail) => ({ _tag: "ProtocolError", reason: "ProviderError", detail }) as const)
  )
  let open = true
  const lines = Stream.async<string>((emit) => {
    const reader = Readline.createInterface({ input: child.stdout, crlfDelay: Infinity })
    reader.on("line", (line) => {
      process.stdout.write(line + "\n")
      void emit.single(line)
    })
    reader.on("close", () => void emit.end())
  })
  const channel: Driver.Channel = {
    write: (frame) =>
      Effect.sync(() => {
        if (open) child.stdin.write((typeof frame === "string" ? frame : reveal(frame)) + "\n")
      }),
    lines,
    closeInput: Effect.sync(() => {
      open = false
      child.stdin.end()
    })
  }
  const request: Driver.InvocationRequest = { ...spec.request, hostEnv: process.env }
  const approve = approvals === undefined
    ? undefined
    : yield* approverOf(approvals, process.env[approvals.tokenVariable] ?? "")
  const session = yield* Acp.attach(
    {
      // Only the hosted tools' permission requests depend on it (the driver's `parse` names the
      // outputs with the configured naming); a naming function the runner cannot be given
      // recognizes no hosted tool.
      naming: AcpMap.namings[spec.naming] ?? noHostedTools,
      startTimeout: spec.startTimeoutMs,
      // The runner cannot see the gateway (`hostedToolsListed` below is already complete).
      hostedToolsTimeout: "1 minute",
      cancelTimeout: spec.cancelTimeoutMs,
      permission: Acp.denyPermission,
      sources: true,
      headerSecrets: spec.headerSecrets
    },
    channel,
    {
      hostedKey: spec.request.hosted.key,
      session: spec.request.session,
      request,
      hostedToken: Redacted.make(token),
      hostedToolsListed: Effect.void,
      ...(approve === undefined ? {} : { approve })
    }
  )
  // The loaded session's replay has ended (`attach` waited for it): the driver's `parse` takes
  // the updates from here on as the turn's.
  if (spec.request.session._tag === "Resume") process.stdout.write(`${JSON.stringify(AcpMap.replayedMarker)}\n`)
  yield* Stream.runDrain(session.turn({ runId: spec.request.runId, prompt: spec.request.prompt }))
})

void Effect.runPromiseExit(Effect.scoped(program)).then((exit) => {
  if (Exit.isFailure(exit)) {
    const failure = Cause.failureOption(exit.cause)
    const line = failure._tag === "Some"
      ? `${failure.value.reason}: ${failure.value.detail}`
      : `ProviderError: ${Cause.pretty(exit.cause).split("\n")[0]}`
    process.stderr.write(`${failurePrefix}${line.replace(/\n/g, " ")}\n`)
  }
  process.exitCode = Exit.isSuccess(exit) ? 0 : 2
})
