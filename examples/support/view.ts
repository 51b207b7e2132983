/**
 * A live terminal view of a run's events: assistant text as it streams, each tool call with its
 * input and its output or rejection, usage and duration at the end. Colours only on a TTY.
 */
import type * as Event from "@tether/core/Event"
import * as Effect from "effect/Effect"

const tty = process.stdout.isTTY === true
const paint = (code: string) => (text: string) => tty ? `\u001b[${code}m${text}\u001b[0m` : text
export const dim = paint("2")
export const bold = paint("1")
export const cyan = paint("36")
export const green = paint("32")
export const red = paint("31")
export const yellow = paint("33")

const short = (value: unknown, max = 140): string => {
  const text = typeof value === "string" ? value : JSON.stringify(value) ?? "undefined"
  const line = text.replace(/\s+/g, " ")
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

/** Writes `text` to stdout (the view owns the terminal while a run streams). */
export const write = (text: string): void => void process.stdout.write(text)

/**
 * A fresh view. `onEvent` renders one event; keep one view per run (it tracks whether the
 * assistant's current message already streamed as deltas).
 */
export const make = () => {
  let streaming = false // inside an assistant line fed by TextDelta
  let streamed = false // the current message arrived as deltas (its Message is not reprinted)
  const endLine = () => {
    if (streaming) write("\n")
    streaming = false
  }
  const onEvent = (event: Event.Event): Effect.Effect<void> =>
    Effect.sync(() => {
      switch (event._tag) {
        case "RunStarted":
          write(
            `${bold("▶ run")} ${dim(event.runId)}  provider ${bold(event.provider)}` +
              `  tools ${event.effectiveTools.join(", ") || "(none)"}\n`
          )
          break
        case "ThreadOpened": {
          const { opening } = event
          const reason = opening.reason === undefined
            ? ""
            : opening.reason._tag === "Incompatible"
            ? ` (changed: ${opening.reason.components.join(", ")})`
            : ` (${opening.reason.detail})`
          write(dim(`  thread ${opening.key} ${opening.mode}${reason}\n`))
          break
        }
        case "ProcessStarted":
          write(dim(`  process ${event.pid} started: ${event.command}\n`))
          break
        case "SessionStarted":
          write(dim(
            `  session ${event.sessionId}${event.model === undefined ? "" : ` · model ${event.model}`}` +
              `${event.resumed ? " · resumed" : ""}\n`
          ))
          break
        case "TextDelta":
          if (!streaming) write(`${cyan("  assistant ›")} `)
          write(event.text)
          streaming = true
          streamed = true
          break
        case "ReasoningDelta":
          break
        case "Message":
          if (event.role === "assistant" && !streamed && event.text !== "") {
            write(`${cyan("  assistant ›")} ${event.text}\n`)
          }
          endLine()
          streamed = false
          break
        case "ToolCall":
          endLine()
          streamed = false
          if (event.phase === "start") {
            write(`${yellow("  ⚙ tool")} ${bold(event.name)} ${dim(`(${event.source})`)} ${short(event.input)}\n`)
          } else if (event.isError === true) {
            write(`${red("    ✗ rejected")} ${short(event.output)}\n`)
          } else {
            write(`${green("    ✓ output")} ${short(event.output)}\n`)
          }
          break
        case "Usage":
          break
        case "Notice":
          if (event.level !== "info") {
            endLine()
            write(yellow(`  ! ${event.kind}: ${short(event.message)}\n`))
          }
          break
        case "ProcessExited":
          endLine()
          write(dim(`  process ${event.pid} exited${event.exitCode === undefined ? "" : ` with ${event.exitCode}`}\n`))
          break
        case "Dropped":
          endLine()
          write(dim(`  (${event.count} deltas dropped under backpressure)\n`))
          break
        case "RunFinished": {
          endLine()
          const usage = event.result.usage
          const tokens = usage === undefined
            ? "usage not reported"
            : `${usage.inputTokens ?? "?"} in / ${usage.outputTokens ?? "?"} out tokens` +
              (usage.costUsd === undefined ? "" : ` · $${usage.costUsd.toFixed(4)}`)
          const outcome = event.outcome === "success"
            ? green(event.outcome)
            : red(`${event.outcome}${event.reason === undefined ? "" : ` (${event.reason})`}`)
          write(`${bold("■")} ${outcome} in ${event.durationMs.toFixed(0)} ms · ${tokens}\n`)
          break
        }
      }
    })
  return { onEvent }
}

/**
 * The examples' self-check: each claim an example makes is printed with ✓ or ✗; `conclude`
 * prints the closing line and sets a non-zero exit code when any claim failed (CI runs every
 * example and expects 0).
 */
export const checks = () => {
  const failed: Array<string> = []
  return {
    claim: (label: string, holds: boolean): void => {
      if (!holds) failed.push(label)
      write(`  ${holds ? green("✓") : red("✗")} ${label}\n`)
    },
    conclude: (summary: string): void => {
      if (failed.length === 0) write(`${green("✓")} ${summary}\n`)
      else {
        write(red(`✗ ${failed.length} claim(s) failed: ${failed.join("; ")}\n`))
        process.exitCode = 1
      }
    }
  }
}
