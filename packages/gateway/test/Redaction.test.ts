/**
 * The redactor over many live tokens: a gateway serving a fleet holds one token per registration
 * and one per running process, and from a few of them on the redactor reads its input once
 * against an index of them all instead of searching for each (bench/redact.ts measures it). Its
 * answers must be exactly those of the rule, which this file writes out as the reference, token by
 * token and character by character, and compares on generated inputs: whole tokens, their starts
 * and ends, tokens inside long runs of the token alphabet (base64), tokens back to back, tokens
 * that overlap, multi-byte text. With as few tokens as are searched one by one, as many as the
 * index takes for text but not bytes, more than both, and after credentials are released (their
 * tokens leave the index) and revoked early (they stay in it).
 *
 * The rule: every character of every occurrence of a live token is replaced. The marker is written
 * over each occurrence, left to right, so where two occurrences overlap the later marker starts
 * inside the earlier one and the text keeps its length.
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import { randomBytes } from "node:crypto"
import * as Redact from "../src/internal/redact.js"

const marker = Gateway.redactionMarker
const length = marker.length

/** The rule, written out: every occurrence found token by token, the marker written over each in order of position. */
const reference = (values: ReadonlyArray<string>) => {
  const overwrite = (units: Array<string>, find: (value: string, from: number) => number): string => {
    const starts: Array<number> = []
    for (const v of values) for (let at = find(v, 0); at !== -1; at = find(v, at + 1)) starts.push(at)
    starts.sort((a, b) => a - b)
    for (const at of starts) for (let k = 0; k < length; k++) units[at + k] = marker[k]!
    return units.join("")
  }
  const text = (input: string): string => {
    if (values.length === 0 || input.length < length) return input
    return overwrite(input.split(""), (v, from) => input.indexOf(v, from))
  }
  const heldBack = (input: string): number => {
    let longest = 0
    for (const v of values) {
      for (let k = Math.min(length - 1, input.length); k > longest; k--) {
        if (input.endsWith(v.slice(0, k))) {
          longest = k
          break
        }
      }
    }
    return longest
  }
  /** The longest cut (from 8 characters) of any token: its end at the text's start, or its start at the text's end. */
  const cut = (input: string, atStart: boolean): number => {
    let longest = 0
    for (const v of values) {
      for (let k = Math.min(length - 1, input.length); k >= 8 && k > longest; k--) {
        if (atStart ? input.startsWith(v.slice(length - k)) : input.endsWith(v.slice(0, k))) {
          longest = k
          break
        }
      }
    }
    return longest
  }
  const window = (input: string): string => {
    if (values.length === 0) return input
    let out = text(input)
    const start = cut(out, true)
    if (start > 0) out = marker + out.slice(start)
    const end = cut(out, false)
    if (end > 0) out = out.slice(0, out.length - end) + marker
    return out
  }
  const bytes = (input: string): string => {
    const buffer = Buffer.from(input)
    if (values.length === 0 || buffer.length < length) return input
    // One latin1 character per byte, so that positions are byte offsets.
    const latin1 = buffer.toString("latin1")
    return Buffer.from(overwrite(latin1.split(""), (v, from) => latin1.indexOf(v, from)), "latin1").toString()
  }
  return { text, heldBack, window, bytes }
}

/** A small deterministic generator (the same inputs on every run). */
const generator = (seed: number) => {
  let state = seed
  const next = (n: number): number => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    return (state >>> 8) % n
  }
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
  const base64 = (n: number) => Array.from({ length: n }, () => alphabet[next(alphabet.length)]).join("")
  const overlapping = new Map<ReadonlyArray<string>, ReadonlyArray<string>>()
  return (tokens: ReadonlyArray<string>): string => {
    // Two tokens where one's end is the other's start, written once: "AB" with the shared part once.
    let pairs = overlapping.get(tokens)
    if (pairs === undefined) {
      const found: Array<string> = []
      for (const a of tokens) {
        for (const b of tokens) {
          for (let k = length - 1; k >= 1; k--) {
            if (a !== b && a.endsWith(b.slice(0, k))) found.push(a + b.slice(k))
          }
        }
      }
      pairs = found
      overlapping.set(tokens, pairs)
    }
    const parts: Array<string> = []
    const count = 1 + next(7)
    for (let i = 0; i < count; i++) {
      const token = tokens[next(tokens.length)]!
      switch (next(10)) {
        case 9:
          parts.push(pairs.length === 0 ? token : pairs[next(pairs.length)]!)
          break
        case 0:
          parts.push(token)
          break
        case 1:
          parts.push(token.slice(0, 1 + next(length - 1)))
          break
        case 2:
          parts.push(token.slice(1 + next(length - 1)))
          break
        case 3:
          parts.push(base64(1 + next(120)))
          break
        case 4:
          parts.push(`${base64(next(50))}${token}${base64(next(50))}`)
          break
        case 5:
          parts.push(token + tokens[next(tokens.length)]!)
          break
        case 6:
          parts.push(" — é字 ")
          break
        case 7:
          parts.push("\n")
          break
        default:
          parts.push(`word_${next(100)}`)
      }
    }
    return parts.join("")
  }
}

/** Random base64url from the platform's generator, as the gateway's tokens are. */
const freshBase64 = (n: number): string => randomBytes(n).toString("base64url").slice(0, n)

/** A gateway with one registration and `credentials` credentials, each in a scope of its own. */
const gatewayWith = (credentials: number) =>
  Effect.gen(function*() {
    const gateway = yield* Gateway.make()
    const registration = yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
    const minted: Array<
      { readonly token: string; readonly scope: Scope.CloseableScope; readonly revoke: Effect.Effect<void> }
    > = []
    for (let i = 0; i < credentials; i++) {
      const scope = yield* Scope.make()
      const credential = yield* registration.credential().pipe(Scope.extend(scope))
      minted.push({ token: Redacted.value(credential.token), scope, revoke: credential.revoke })
    }
    return { redactor: gateway.redactor, registrationToken: Redacted.value(registration.token), minted }
  })

const compare = (
  redactor: Gateway.Redactor,
  live: ReadonlyArray<string>,
  known: ReadonlyArray<string>,
  seed: number
) => {
  const expected = reference(live)
  const next = generator(seed)
  for (let i = 0; i < 1500; i++) {
    const input = next(known)
    expect(redactor.text(input), `text of ${JSON.stringify(input)}`).toBe(expected.text(input))
    expect(redactor.heldBack(input), `heldBack of ${JSON.stringify(input)}`).toBe(expected.heldBack(input))
    expect(redactor.window(input), `window of ${JSON.stringify(input)}`).toBe(expected.window(input))
    expect(Buffer.from(redactor.bytes(Buffer.from(input))).toString(), `bytes of ${JSON.stringify(input)}`).toBe(
      expected.bytes(input)
    )
    expect(redactor.value({ [input]: [input] })).toEqual({ [expected.text(input)]: [expected.text(input)] })
  }
}

describe("The redactor over many live tokens", () => {
  for (const credentials of [3, 20, 80]) {
    it.live(`answers as the rule written token by token does, with ${credentials + 1} live tokens`, () =>
      Effect.gen(function*() {
        const { minted, redactor, registrationToken } = yield* gatewayWith(credentials)
        const all = [registrationToken, ...minted.map((m) => m.token)]
        compare(redactor, all, all, credentials)
        // Revoked early: no longer accepted, still replaced until its scope closes.
        for (const m of minted.slice(0, credentials >> 2)) yield* m.revoke
        compare(redactor, all, all, credentials + 1)
        // Released: the token leaves the redactor (an input may still hold it: left as it is).
        const released = minted.slice(0, credentials >> 1)
        for (const m of released) yield* Scope.close(m.scope, Exit.void)
        const live = all.filter((token) => !released.some((m) => m.token === token))
        compare(redactor, live, all, credentials + 2)
        expect(redactor.text(`x ${released[0]!.token} y`)).toBe(`x ${released[0]!.token} y`)
      }).pipe(Effect.scoped))
  }

  it.live("finds a token anywhere in a long run of the token alphabet, in text and in bytes", () =>
    Effect.gen(function*() {
      const { minted, redactor } = yield* gatewayWith(80)
      const token = minted[41]!.token
      const noise = "Ab0_-".repeat(4000)
      for (const at of [0, 1, 42, 43, 4999, noise.length]) {
        const input = `${noise.slice(0, at)}${token}${noise.slice(at)}`
        const out = `${noise.slice(0, at)}${marker}${noise.slice(at)}`
        expect(redactor.text(input)).toBe(out)
        expect(Buffer.from(redactor.bytes(Buffer.from(input))).toString()).toBe(out)
      }
      // Back to back, and the same token twice with one character between.
      expect(redactor.text(`${token}${minted[7]!.token}`)).toBe(`${marker}${marker}`)
      expect(redactor.text(`${token}a${token}`)).toBe(`${marker}a${marker}`)
      // A start held back from 1 character on, as long as it could still become the token.
      expect(redactor.heldBack(`text ${token.slice(0, 1)}`)).toBeGreaterThanOrEqual(1)
      expect(redactor.heldBack(`text ${token.slice(0, 30)}`)).toBe(30)
      expect(redactor.heldBack("text.")).toBe(0)
      // Cut by both edges of a window.
      expect(redactor.window(`${token.slice(25)} middle ${minted[3]!.token.slice(0, 9)}`)).toBe(
        `${marker} middle ${marker}`
      )
    }).pipe(Effect.scoped))

  it("replaces every character of tokens that overlap, below and above both thresholds", () => {
    const a = freshBase64(43)
    const b = a.slice(30) + freshBase64(30) // starts with a's last 13 characters
    const c = b.slice(42) + freshBase64(42) // starts with b's last character
    const d = freshBase64(42) + a.slice(0, 1) // ends with a's first character
    for (const others of [3, 20, 80]) {
      const tokens = new Redact.Tokens()
      const all = [a, b, c, d, ...Array.from({ length: others }, () => freshBase64(43))]
      for (const token of all) tokens.add(token)
      const redactor = Redact.make(tokens)
      const expected = reference(all)
      const chain = `${a}${b.slice(13)}${c.slice(1)}`
      const chainOut = `${marker.slice(0, 30)}${marker.slice(0, 42)}${marker}`
      const inputs = [
        [`<${chain}>`, `<${chainOut}>`],
        [`${d}${a.slice(1)} `, `${marker.slice(0, 42)}${marker} `],
        [`${a}${b.slice(13)}${a}`, `${marker.slice(0, 30)}${marker}${marker}`]
      ] as const
      for (const [input, out] of inputs) {
        expect(redactor.text(input), `${all.length} tokens`).toBe(out)
        expect(expected.text(input)).toBe(out)
        expect(Buffer.from(redactor.bytes(Buffer.from(input))).toString()).toBe(out)
        expect(redactor.window(input)).toBe(expected.window(input))
        expect(redactor.value([input])).toEqual([out])
      }
      // Only gateway tokens are held: anything else is a defect of the caller.
      expect(() => tokens.add("not a token")).toThrow()
    }
  })
})
