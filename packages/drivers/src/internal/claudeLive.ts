/**
 * Claude Code's live session: one `claude -p --input-format stream-json` process serves every
 * turn of a thread (DESIGN §12, LIVE.md).
 *
 * Correlation. Every user line the session writes carries a fresh `uuid`; with
 * `--replay-user-messages` the CLI prints that line back (`isReplay: true`, same `uuid`) when the
 * input enters the conversation. The CLI takes inputs in the order they were written and prints
 * one `result` per run of its query loop (a "CLI turn"). A host turn ends at the first `result`
 * after which none of its inputs is still waiting: an input steered into a turn with no tool
 * boundary left is answered by a CLI turn of its own, and the host turn goes on until that
 * answer's `result`. Slash commands (`/compact`) run without a replay: a CLI turn that printed no
 * replay consumed the oldest waiting input when that input is a command. Inputs are taken in
 * order, so a replay also consumes every older waiting input.
 *
 * One host turn at a time is in the CLI: a turn writes its prompt only once the CLI has finished
 * every input of the turns before it. (Inputs queued together form one run of the CLI, which an
 * interrupt aborts as a whole: a new prompt queued behind an interrupted turn's leftovers would
 * be aborted with them.)
 *
 * @internal
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as Approval from "@tether/core/Approval"
import * as Driver from "@tether/core/Driver"
import type { Usage } from "@tether/core/Result"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberMap from "effect/FiberMap"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Frames from "./claudeLiveFrames.js"
import * as parser from "./claudeParse.js"
import { isBlank, notice } from "./lines.js"

type Json = { readonly [key: string]: unknown }
type Output = Driver.Output
type LineResult = ReadonlyArray<Output> | Driver.ProtocolError

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string | undefined => typeof u === "string" ? u : undefined
const num = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined
const isError = (result: LineResult): result is Driver.ProtocolError => !Array.isArray(result)

const protocolError = (detail: string) => new Driver.ProtocolError({ reason: "ProviderError", detail })

/** One host turn, from `turn()` until the CLI has taken and answered all of its inputs. */
interface Turn {
  readonly outputs: Queue.Queue<Take.Take<Output, Driver.ProtocolError>>
  /** Its consumer still gets outputs: no terminal or failure delivered yet, stream not closed. */
  open: boolean
  readonly parser: parser.State
  /** `result` records of this turn so far. */
  results: number
  interrupting: boolean
  /** The session this turn reported (`SessionStarted`), if any. */
  session: string | undefined
  usage: Usage | undefined
  readonly errors: Array<string>
  failed: boolean
}

/** A written user line of the current turn that the CLI has not taken yet. */
interface Input {
  readonly id: string
  readonly command: boolean
  /** `turn.results` when it was written: its replay before another `result` means injected. */
  readonly resultsAtWrite: number
  /** Set for `steer`: settled once the protocol shows what the CLI did with it. */
  readonly delivery: Deferred.Deferred<Driver.Delivery, Driver.ProtocolError> | undefined
}

const injected: Driver.Delivery = { _tag: "Injected" }
const queued: Driver.Delivery = { _tag: "Queued" }

/** Bound on the outputs kept from records printed while no turn runs. */
const idleLimit = 256

/**
 * A session without its reader (`build`): `feed` demultiplexes stdout lines (synchronously, then
 * runs the writes they call for), `end` is the end of stdout, `start` begins a turn and gives the
 * queue its outputs go to (what `turn` streams). `attach` runs `feed` over `channel.lines`.
 *
 * @internal
 */
export interface Parts {
  readonly session: Driver.LiveSession
  readonly feed: (lines: Iterable<string>) => Effect.Effect<void>
  readonly end: Effect.Effect<void>
  readonly start: (
    request: Driver.LiveTurn
  ) => Effect.Effect<Queue.Dequeue<Take.Take<Output, Driver.ProtocolError>>, Driver.ProtocolError, Scope.Scope>
}

/**
 * Attaches to a spawned live process: one reader fiber (in the scope) demultiplexes its stdout.
 *
 * @internal
 */
export const attach = (
  channel: Driver.Channel,
  context: Driver.ParseContext,
  options: Frames.AttachOptions = {}
): Effect.Effect<Driver.LiveSession, never, Scope.Scope> =>
  Effect.gen(function*() {
    const parts = yield* build(channel, context, options)
    yield* channel.lines.pipe(
      Stream.runForEachChunk(parts.feed),
      Effect.ensuring(parts.end),
      Effect.forkScoped
    )
    return parts.session
  })

/** @internal */
export const build = (
  channel: Driver.Channel,
  context: Driver.ParseContext,
  options: Frames.AttachOptions = {}
): Effect.Effect<Parts, never, Scope.Scope> =>
  Effect.gen(function*() {
    const newId = options.newId ?? (() => crypto.randomUUID())
    const handlers = yield* FiberMap.make<string>()
    /** The turn the CLI works for (its consumer may be gone); records go to it. */
    let current: Turn | undefined
    /** The current turn's inputs the CLI has not taken, oldest first. */
    let inputs: Array<Input> = []
    /** Turns waiting for the current one to be over before they write their prompt. */
    const waiting: Array<Deferred.Deferred<void, Driver.ProtocolError>> = []
    /** Our control requests awaiting the CLI's `control_response`. */
    const controls = new Map<string, Deferred.Deferred<void, Driver.ProtocolError>>()
    /** Whether the CLI turn running now printed a replay. */
    let replayed = false
    /** The CLI's running `total_cost_usd` (cumulative over the process). */
    let cost = 0
    let idle: Array<Output> = []
    let idleFailure: Driver.ProtocolError | undefined
    let ended: Driver.ProtocolError | undefined
    let closing = false

    const settle = (input: Input, delivery: Driver.Delivery) => {
      if (input.delivery !== undefined) Deferred.unsafeDone(input.delivery, Exit.succeed(delivery))
    }

    const offer = (turn: Turn, outputs: ReadonlyArray<Output>) => {
      if (turn.open && outputs.length > 0) Queue.unsafeOffer(turn.outputs, Take.chunk(Chunk.fromIterable(outputs)))
    }

    const close = (turn: Turn, last: Take.Take<Output, Driver.ProtocolError>) => {
      if (!turn.open) return
      turn.open = false
      Queue.unsafeOffer(turn.outputs, last)
    }

    /** The current turn is over: the CLI took and answered all of its inputs. */
    const over = () => {
      current = undefined
      for (const next of waiting.splice(0)) Deferred.unsafeDone(next, Exit.void)
    }

    /** Outputs of records printed while no turn runs: kept for the next turn, never a terminal. */
    const keepIdle = (result: LineResult) => {
      if (isError(result)) {
        idleFailure ??= result
        return
      }
      for (const output of result) {
        if (output._tag === "SessionStarted" || output._tag === "Usage") continue
        idle.push(
          output._tag === "Terminal"
            ? notice("info", "idle_result", "Claude Code ended a turn no host turn asked for", output.raw)
            : output
        )
      }
      if (idle.length > idleLimit) idle = idle.slice(-idleLimit)
    }

    const route = (result: LineResult) => {
      const turn = current
      if (turn === undefined) return keepIdle(result)
      if (isError(result)) return close(turn, Take.fail(result))
      offer(
        turn,
        result.filter((output) => {
          if (output._tag !== "SessionStarted") return true
          // Each CLI turn starts with `system/init`; a host turn reports its session once.
          if (turn.session === output.sessionId) return false
          turn.session = output.sessionId
          return true
        })
      )
    }

    const parserState = () => current?.parser ?? parser.makeState()

    const onReplay = (id: string | undefined) => {
      const index = inputs.findIndex((input) => input.id === id)
      if (index === -1 || current === undefined) return
      replayed = true
      const taken = inputs.splice(0, index + 1)
      const last = taken[taken.length - 1]!
      for (const input of taken) {
        settle(input, input === last && current.results === input.resultsAtWrite ? injected : queued)
      }
    }

    const onInit = (record: Json, effects: Array<Effect.Effect<void>>) => {
      replayed = false
      // A CLI turn for input of an interrupted turn: abort it too.
      if (current?.interrupting === true && inputs.length > 0) effects.push(Effect.ignore(sendInterrupt))
      route(parser.onRecord(record, parserState(), context))
    }

    /** This CLI turn's cost: `total_cost_usd` is a running total over the process. */
    const costOf = (record: Json): number | undefined => {
      const total = num(record["total_cost_usd"])
      if (total === undefined) return undefined
      const share = total >= cost ? total - cost : total
      cost = total
      return share
    }

    const onResult = (record: Json) => {
      if (!replayed && inputs[0]?.command === true) settle(inputs.shift()!, queued)
      replayed = false
      const share = costOf(record)
      const turn = current
      if (turn === undefined) return keepIdle(parser.onRecord(record, parser.makeState(), context))
      // Inputs still waiting were not taken into the CLI turn that just ended.
      for (const input of inputs) settle(input, queued)
      turn.results++
      const pending = inputs.length > 0
      const parsed = parser.onRecord(record, turn.parser, context)
      if (isError(parsed)) {
        close(turn, Take.fail(parsed))
        if (!pending) over()
        return
      }
      const terminal = parsed.find((o): o is Driver.Terminal => o._tag === "Terminal")
      if (terminal === undefined) return
      turn.usage = Frames.addUsage(
        turn.usage,
        terminal.usage === undefined || share === undefined ? terminal.usage : Frames.withCost(terminal.usage, share)
      )
      if (!terminal.ok) {
        turn.failed = true
        if (terminal.error !== undefined) turn.errors.push(terminal.error)
      }
      const usage: Array<Output> = turn.usage === undefined ? [] : [{ _tag: "Usage", usage: turn.usage }]
      if (pending && !turn.interrupting) {
        return offer(turn, [
          ...usage,
          notice("info", "queued_input", "Claude Code answered; it now answers the input sent during the turn", record)
        ])
      }
      const ok = !turn.failed && !pending
      const reason = str(record["terminal_reason"]) ?? str(record["subtype"]) ?? "unknown"
      offer(turn, [...usage, {
        ...terminal,
        ok,
        usage: turn.usage,
        error: ok
          ? undefined
          : turn.interrupting
          ? `interrupted: Claude Code ended the turn (${reason})`
          : turn.errors.join("\n") || "Claude Code reported a failure"
      }])
      close(turn, Take.end)
      // An interrupted turn with inputs left stays current until their CLI turns are aborted.
      if (!pending) over()
    }

    const onControlResponse = (record: Json) => {
      const response = isRecord(record["response"]) ? record["response"] : {}
      const id = str(response["request_id"])
      const pending = id === undefined ? undefined : controls.get(id)
      if (id === undefined || pending === undefined) {
        return route([notice("info", "control_response", "a control response to no request of this session", record)])
      }
      controls.delete(id)
      Deferred.unsafeDone(
        pending,
        response["subtype"] === "success"
          ? Exit.void
          : Exit.fail(
            protocolError(`Claude Code refused the control request: ${str(response["error"]) ?? "no reason"}`)
          )
      )
    }

    const onControlRequest = (record: Json, effects: Array<Effect.Effect<void>>) => {
      const id = str(record["request_id"])
      const request = isRecord(record["request"]) ? record["request"] : undefined
      if (id === undefined || request === undefined) {
        return route([notice("warning", "malformed", "a control request without request_id or request", record)])
      }
      const subtype = str(request["subtype"]) ?? ""
      const answer = (reply: Frames.ControlReply) =>
        Effect.ignore(channel.write(Frames.controlResponseFrame(id, reply)))
      const handler = options.onControlRequest
      if (handler === undefined) {
        route([
          notice(
            "warning",
            "control_request",
            `Claude Code asked "${subtype}"; no handler: answered with an error`,
            record
          )
        ])
        return effects.push(answer({ _tag: "Error", error: `Tether does not answer "${subtype}" control requests` }))
      }
      effects.push(Effect.asVoid(FiberMap.run(
        handlers,
        id,
        handler({ requestId: id, subtype, request }).pipe(
          Effect.catchAllDefect(() =>
            Effect.succeed<Frames.ControlReply>({ _tag: "Error", error: "the handler failed" })
          ),
          Effect.flatMap(answer)
        )
      )))
    }

    const onLine = (line: string, effects: Array<Effect.Effect<void>>) => {
      if (isBlank(line)) return
      let record: unknown
      try {
        record = JSON.parse(line)
      } catch {
        return route(parser.onLine(line, parserState(), context))
      }
      if (!isRecord(record)) return route(parser.onLine(line, parserState(), context))
      switch (record["type"]) {
        case "user":
          if (record["isReplay"] === true) return onReplay(str(record["uuid"]))
          break
        case "system":
          if (record["subtype"] === "init") return onInit(record, effects)
          break
        case "result":
          return onResult(record)
        case "control_response":
          return onControlResponse(record)
        case "control_request":
          return onControlRequest(record, effects)
        case "control_cancel_request": {
          const id = str(record["request_id"])
          if (id !== undefined) effects.push(FiberMap.remove(handlers, id))
          return
        }
      }
      route(parser.onRecord(record, parserState(), context))
    }

    const onEnd = Effect.sync(() => {
      const error = protocolError("Claude Code's live process ended before the turn's result (its stdout closed)")
      ended = error
      if (current !== undefined) close(current, Take.fail(error))
      current = undefined
      for (const input of inputs) {
        if (input.delivery !== undefined) Deferred.unsafeDone(input.delivery, Exit.fail(error))
      }
      inputs = []
      for (const next of waiting.splice(0)) Deferred.unsafeDone(next, Exit.fail(error))
      for (const pending of controls.values()) Deferred.unsafeDone(pending, Exit.fail(error))
      controls.clear()
    })

    /**
     * Writes an interrupt request; its answer settles the returned deferred. Never waits itself:
     * the reader fiber writes these too, and only the reader reads the answer.
     */
    const sendInterrupt: Effect.Effect<Deferred.Deferred<void, Driver.ProtocolError>, Driver.ProtocolError> = Effect
      .suspend(() => {
        if (ended !== undefined) return Effect.fail(ended)
        const id = newId()
        const answered = Deferred.unsafeMake<void, Driver.ProtocolError>(FiberId.none)
        controls.set(id, answered)
        return channel.write(Frames.interruptFrame(id)).pipe(
          Effect.as(answered),
          Effect.tapError(() => Effect.sync(() => controls.delete(id)))
        )
      })

    const feed = (lines: Iterable<string>) =>
      Effect.suspend(() => {
        const effects: Array<Effect.Effect<void>> = []
        for (const line of lines) onLine(line, effects)
        return effects.length === 0 ? Effect.void : Effect.all(effects, { discard: true })
      })

    /** Writes a user line of the current turn; the input waits for the CLI from then on. */
    const write = (text: string, delivery: Input["delivery"]) =>
      Effect.suspend(() => {
        const input: Input = {
          id: newId(),
          command: Frames.isCommand(text),
          resultsAtWrite: current?.results ?? 0,
          delivery
        }
        inputs.push(input)
        return channel.write(Frames.userFrame(text, input.id)).pipe(Effect.tapError(() =>
          Effect.sync(() => {
            inputs = inputs.filter((i) => i !== input)
          })
        ))
      })

    /** Waits until no earlier turn has work left in the CLI. */
    const previousOver: Effect.Effect<void, Driver.ProtocolError> = Effect.suspend(() => {
      if (ended !== undefined) return Effect.fail(ended)
      if (current === undefined) return Effect.void
      const next = Deferred.unsafeMake<void, Driver.ProtocolError>(FiberId.none)
      waiting.push(next)
      return Deferred.await(next)
    })

    const start = (request: Driver.LiveTurn) =>
      Effect.gen(function*() {
        yield* previousOver
        const failure = idleFailure ?? ended ?? (closing ? protocolError("the live session is shut down") : undefined)
        idleFailure = undefined
        if (failure !== undefined) return yield* Effect.fail(failure)
        const state: Turn = {
          outputs: yield* Queue.unbounded<Take.Take<Output, Driver.ProtocolError>>(),
          open: true,
          parser: parser.makeState(),
          results: 0,
          interrupting: false,
          session: undefined,
          usage: undefined,
          errors: [],
          failed: false
        }
        offer(state, idle)
        idle = []
        current = state
        yield* Effect.addFinalizer(() => Effect.sync(() => (state.open = false)))
        yield* write(request.prompt, undefined).pipe(Effect.tapError(() => Effect.sync(over)))
        return state.outputs as Queue.Dequeue<Take.Take<Output, Driver.ProtocolError>>
      })

    const turn = (request: Driver.LiveTurn): Stream.Stream<Output, Driver.ProtocolError> =>
      Stream.unwrapScoped(Effect.map(start(request), (outputs) => Stream.flattenTake(Stream.fromQueue(outputs))))

    const steer = (text: string): Effect.Effect<Driver.Delivery, Driver.ProtocolError> =>
      Effect.suspend(() => {
        if (ended !== undefined) return Effect.fail(ended)
        if (current === undefined || !current.open) {
          return Effect.fail(
            new Driver.ProtocolError({ reason: "NoActiveTurn", detail: "no turn is running to steer" })
          )
        }
        if (current.interrupting) return Effect.fail(protocolError("the running turn is being interrupted"))
        const delivery = Deferred.unsafeMake<Driver.Delivery, Driver.ProtocolError>(FiberId.none)
        return Effect.zipRight(write(text, delivery), Deferred.await(delivery))
      })

    const interrupt: Effect.Effect<void, Driver.ProtocolError> = Effect.suspend(() => {
      if (current !== undefined) current.interrupting = true
      return Effect.flatMap(sendInterrupt, Deferred.await)
    })

    const shutdown: Effect.Effect<void> = Effect.suspend(() => {
      closing = true
      return channel.closeInput
    })

    const session: Driver.LiveSession = { turn, steer, interrupt, shutdown }
    return { session, feed, end: onEnd, start } satisfies Parts
  })

/**
 * The live member of the Claude driver, over the one-shot `prepare` of the same configuration.
 *
 * @internal
 */
export const make = (
  prepare: (
    request: Driver.InvocationRequest
  ) => Effect.Effect<Driver.Invocation, Driver.ProtocolError, FileSystem.FileSystem | Path.Path>,
  approver: Driver.ApproverTool
): Driver.Live => ({
  open: (request) =>
    Effect.map(Frames.open(prepare)(request), (invocation) =>
      request.liveApprovals === true
        // Each built-in call not allowed outright is asked over stdio (`can_use_tool`).
        ? { ...invocation, args: [...invocation.args, "--permission-prompt-tool", "stdio"] }
        : invocation),
  attach: (channel, context) => {
    // Claude Code reads a resumed session only at the turn's first message, and refuses a missing
    // one there, after the turn has begun: the attach refuses it first, so that core can still
    // restart the thread fresh (a rejected resume is retried only while nothing was shown).
    const session = context.session
    if (session._tag === "Resume" && !hasSession(context.request.profileDir, session.id)) {
      return Effect.fail(
        new Driver.ProtocolError({ reason: "ResumeRejected", detail: `no Claude Code session ${session.id}` })
      )
    }
    const approve = context.approve
    return approve === undefined
      ? attach(channel, context)
      : attach(channel, context, { onControlRequest: canUseTool(approver, approve) })
  }
})

/** Whether the clone holds Claude Code's transcript of `session` (`projects/<cwd slug>/<session>.jsonl`). */
const hasSession = (profileDir: string, session: string): boolean => {
  const projects = NodePath.join(profileDir, "projects")
  let slugs: ReadonlyArray<string>
  try {
    slugs = NodeFs.readdirSync(projects)
  } catch {
    return false
  }
  return slugs.some((slug) => NodeFs.existsSync(NodePath.join(projects, slug, `${session}.jsonl`)))
}

/**
 * Answers `can_use_tool` control requests (`--permission-prompt-tool stdio`): the request carries
 * the same `{tool_name, input, tool_use_id}` as the one-shot approver tool's call, and the
 * response body is the same `{behavior, updatedInput | message}`. Other subtypes get an error.
 *
 * @internal
 */
export const canUseTool = (
  approver: Driver.ApproverTool,
  approve: (ask: Driver.ApprovalAsk) => Effect.Effect<Approval.Decision>
): Frames.ControlHandler =>
(control) => {
  if (control.subtype !== "can_use_tool") {
    return Effect.succeed({ _tag: "Error", error: `Tether does not answer "${control.subtype}" control requests` })
  }
  const ask = approver.ask(control.request)
  if (typeof ask === "string") {
    return Effect.succeed({
      _tag: "Success",
      response: { behavior: "deny", message: `Not an approval request Tether can read (${ask}).` }
    })
  }
  return Effect.map(approve(ask), (decision) => ({
    _tag: "Success",
    response: approver.answer(decision, control.request)
  }))
}
