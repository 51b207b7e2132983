/**
 * A run's result leaves the text of its stdout tail to be decoded and scrubbed when it is read,
 * often after the run's credential was released: it is scrubbed with a snapshot of the tokens
 * live at the run's end (`Redactor.snapshot`). Here the snapshot is held to the live redactor's
 * own answer at that moment, with a real gateway's live tokens (a few, searched one by one; many,
 * read against the index), on tails cut into reads of every size, with tokens whole, across reads,
 * and cut by either edge, read before and after the credentials are released.
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Process from "../src/internal/process.js"
import { seeded } from "./fixtures/seeded.js"

/**
 * A gateway's redactor with `credentials` + 1 live tokens (its registration's and the
 * credentials'), and the effect that releases the credentials.
 */
const liveTokens = (credentials: number) =>
  Effect.gen(function*() {
    const gateway = yield* Gateway.make()
    const registration = yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
    const tokens = [Redacted.value(registration.token)]
    const scope = yield* Scope.make()
    for (let i = 0; i < credentials; i++) {
      tokens.push(Redacted.value((yield* registration.credential().pipe(Scope.extend(scope))).token))
    }
    return { redactor: gateway.redactor, registration, tokens, release: Scope.close(scope, Exit.void) }
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

describe("a run's raw stdout tail, read after its tokens are released", () => {
  for (const credentials of [2, 70]) {
    it.scoped(
      `is scrubbed as the live tokens at the run's end would scrub it (${credentials + 1} live tokens)`,
      () =>
        Effect.gen(function*() {
          const { redactor, release, tokens } = yield* liveTokens(credentials)
          const random = seeded(credentials)
          const cases = Array.from({ length: 400 }, (_, i) => {
            const plant = (["none", "none", "whole", "head", "end"] as const)[i % 5]!
            const bytes = tailOf(random, tokens, plant)
            const tail = readsOf(random, bytes)
            const text = Process.decodeTail(tail)
            expect(text).toBe(bytes.toString("utf8"))
            // What the run's end saw: the live redactor's answer, and a snapshot of its tokens.
            return { i, plant, bytes, text, expected: redactor.window(text), snapshot: redactor.snapshot() }
          })
          yield* release
          let changed = 0
          for (const { bytes, expected, i, plant, snapshot, text } of cases) {
            const where = `case ${i}, ${plant}, ${bytes.length} bytes`
            expect(snapshot.window(text), where).toBe(expected)
            // A planted token, whole or cut by an edge from 8 characters on, is replaced.
            if (plant !== "none") expect(expected, where).not.toBe(text)
            // Output without a token (random runs of base64url included) reads as written.
            if (plant === "none") expect(expected, where).toBe(text)
            if (redactor.window(text) !== expected) changed++
          }
          // The released credentials' tokens are no longer the live redactor's: only the snapshot
          // scrubs them (most planted tokens are a credential's).
          expect(changed).toBeGreaterThan(150)
        })
    )
  }

  it.scoped("a snapshot keeps the tokens of its moment, not one minted after it, and is one itself", () =>
    Effect.gen(function*() {
      const { redactor, registration, release, tokens } = yield* liveTokens(2)
      const snapshot = redactor.snapshot()
      const later = Redacted.value((yield* registration.credential()).token)
      yield* release
      const marker = Gateway.redactionMarker
      expect(snapshot.text(`a ${tokens[1]} b`)).toBe(`a ${marker} b`)
      expect(redactor.text(`a ${tokens[1]} b`)).toBe(`a ${tokens[1]} b`)
      expect(snapshot.text(later)).toBe(later)
      expect(redactor.text(later)).toBe(marker)
      expect(snapshot.snapshot().text(tokens[2]!)).toBe(marker)
      expect(snapshot.snapshot().text(later)).toBe(later)
    }))
})
