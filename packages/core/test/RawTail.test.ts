/**
 * A run's result leaves the text of its stdout tail to be decoded when it is read, but only when
 * scrubbing it would change nothing. `Redaction.windowKeeps` answers that from the bytes as they
 * were read; here it is held to the redactor's own answer on the decoded text, with a real
 * gateway's live tokens (a few, searched one by one; many, read against the index), on tails cut
 * into reads of every size, with tokens whole, across reads, and cut by either edge.
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Process from "../src/internal/process.js"
import * as Redaction from "../src/internal/redaction.js"
import { seeded } from "./fixtures/seeded.js"

/** A gateway's redactor with `credentials` + 1 live tokens (its registration's and the credentials'). */
const liveTokens = (credentials: number) =>
  Effect.gen(function*() {
    const gateway = yield* Gateway.make()
    const registration = yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
    const tokens = [Redacted.value(registration.token)]
    for (let i = 0; i < credentials; i++) {
      tokens.push(Redacted.value((yield* registration.credential()).token))
    }
    return { redactor: gateway.redactor, tokens }
  })

const base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

/**
 * Output bytes: JSON-ish words, runs of base64url (token-shaped, not tokens), multi-byte
 * characters and bytes that are not UTF-8; and, by `plant`, live tokens placed whole (also
 * overlapping a read's edge, whatever the reads) or cut by the tail's start or end.
 */
const tailOf = (
  random: () => number,
  tokens: ReadonlyArray<string>,
  plant: "none" | "whole" | "head" | "end"
): Buffer => {
  const pick = <A>(all: ReadonlyArray<A>): A => all[Math.floor(random() * all.length)]!
  const parts: Array<Buffer> = []
  const size = Math.floor(random() * (random() < 0.3 ? 120 : 20_000))
  let length = 0
  while (length < size) {
    let part: Buffer
    switch (Math.floor(random() * 6)) {
      case 0: {
        let run = ""
        const n = 8 + Math.floor(random() * 60)
        for (let i = 0; i < n; i++) run += pick([...base64url])
        part = Buffer.from(run)
        break
      }
      case 1:
        part = Buffer.from(pick(["é", "€", "😀", "日本"]))
        break
      case 2:
        part = Buffer.from([pick([0xc3, 0xe2, 0x80, 0xff, 0xf0, 0xed])])
        break
      case 3:
        part = Buffer.from("\n")
        break
      default:
        part = Buffer.from(`{"type":"delta","text":"w${Math.floor(random() * 1000)}"} `)
    }
    parts.push(part)
    length += part.length
  }
  const token = pick(tokens)
  if (plant === "whole") parts.splice(Math.floor(random() * (parts.length + 1)), 0, Buffer.from(token))
  // From 8 characters on, the redactor replaces a cut token at an edge.
  const cut = 8 + Math.floor(random() * 35)
  if (plant === "head") parts.unshift(Buffer.from(token.slice(token.length - cut)))
  if (plant === "end") parts.push(Buffer.from(token.slice(0, cut)))
  return Buffer.concat(parts)
}

/** The bytes cut into reads as a pipe may hand them over: one, a few, or many tiny ones (more than 64). */
const readsOf = (random: () => number, bytes: Buffer): Process.RawTail => {
  const chunks: Array<Uint8Array> = []
  const tiny = random() < 0.25
  for (let at = 0; at < bytes.length;) {
    const size = 1 + Math.floor(random() * (tiny ? 30 : random() < 0.2 ? 50 : 9000))
    chunks.push(bytes.subarray(at, at + size))
    at += size
  }
  return { chunks, length: bytes.length, total: bytes.length + Math.floor(random() * 100) }
}

describe("a run's raw stdout tail", () => {
  for (const credentials of [2, 70]) {
    it.scoped(
      `is left undecoded only when scrubbing its text would change nothing (${credentials + 1} live tokens)`,
      () =>
        Effect.gen(function*() {
          const { redactor, tokens } = yield* liveTokens(credentials)
          const random = seeded(credentials)
          let kept = 0
          for (let i = 0; i < 400; i++) {
            const plant = (["none", "none", "whole", "head", "end"] as const)[i % 5]!
            const bytes = tailOf(random, tokens, plant)
            const tail = readsOf(random, bytes)
            const text = bytes.toString("utf8")
            expect(Process.decodeTail(tail)).toBe(text)
            const keeps = Redaction.windowKeeps(redactor, tail)
            const where = `case ${i}, ${plant}, ${bytes.length} bytes in ${tail.chunks.length} reads`
            // Never left undecoded when the redactor would change the text.
            if (keeps) expect(redactor.window(text), where).toBe(text)
            // A planted token, whole or cut by an edge from 8 characters on, is always seen.
            if (plant !== "none") expect(keeps, where).toBe(false)
            // Output without a token (random runs of base64url included) takes the fast path.
            if (plant === "none") expect(keeps, where).toBe(true)
            if (keeps) kept++
          }
          expect(kept).toBe(160)
        })
    )
  }

  it.scoped("a token across reads is seen however many reads it spans", () =>
    Effect.gen(function*() {
      const { redactor, tokens } = yield* liveTokens(2)
      const token = Buffer.from(tokens[1]!)
      // Near an edge the edge's own check sees it too; from 43 bytes away only the reads' seams do.
      for (const before of [0, 1, 41, 42, 43, 100, 200]) {
        for (const piece of [1, 2, 7, 21, 42, 43]) {
          const bytes = Buffer.concat([Buffer.from(" ".repeat(before)), token, Buffer.from(`${" ".repeat(100)}\n`)])
          const chunks: Array<Uint8Array> = []
          // Reads of `piece` bytes over the token, the rest whole on either side.
          chunks.push(bytes.subarray(0, before))
          for (let at = before; at < before + token.length; at += piece) {
            chunks.push(bytes.subarray(at, Math.min(at + piece, before + token.length)))
          }
          chunks.push(bytes.subarray(before + token.length))
          const tail = { chunks: chunks.filter((c) => c.length > 0), length: bytes.length, total: bytes.length }
          expect(Redaction.windowKeeps(redactor, tail), `${before} before, reads of ${piece}`).toBe(false)
        }
      }
      expect(Redaction.windowKeeps(redactor, { chunks: [], length: 0, total: 0 })).toBe(true)
    }))
})
