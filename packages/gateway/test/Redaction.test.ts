/**
 * The redactor over many live tokens: a gateway serving a fleet holds one token per registration
 * and one per running process, and from a few of them on the redactor reads its input once
 * against an index of them all instead of searching for each (bench/redact.ts measures it). Its
 * answers must be exactly those of the search for each token, value by value, which this file
 * writes out as the reference and compares on generated inputs: whole tokens, their starts and
 * ends, tokens inside long runs of the token alphabet (base64), tokens back to back, multi-byte
 * text. With as many tokens as the index takes for text but not bytes, more than both, and after
 * credentials are released (their tokens leave the index) and revoked early (they stay in it).
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"

const marker = Gateway.redactionMarker
const length = marker.length

/** The documented behaviour, one value at a time (what the redactor did before its index). */
const reference = (values: ReadonlyArray<string>) => {
  const text = (input: string): string => {
    if (values.length === 0 || input.length < length) return input
    let out = input
    for (const v of values) if (out.includes(v)) out = out.split(v).join(marker)
    return out
  }
  const heldBack = (input: string): number => {
    let longest = 0
    if (input.length === 0) return 0
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
  const window = (input: string): string => {
    if (values.length === 0) return input
    let out = text(input)
    for (const v of values) {
      for (let k = Math.min(length - 1, out.length); k >= 8; k--) {
        if (out.startsWith(v.slice(length - k))) {
          out = marker + out.slice(k)
          break
        }
      }
      for (let k = Math.min(length - 1, out.length); k >= 8; k--) {
        if (out.endsWith(v.slice(0, k))) {
          out = out.slice(0, out.length - k) + marker
          break
        }
      }
    }
    return out
  }
  const bytes = (input: string): string => {
    const buffer = Buffer.from(input)
    if (values.length === 0 || buffer.length < length) return input
    const copy = Buffer.from(buffer)
    for (const v of values) {
      const needle = Buffer.from(v, "latin1")
      for (let at = buffer.indexOf(needle); at !== -1; at = buffer.indexOf(needle, at + needle.length)) {
        Buffer.from(marker, "latin1").copy(copy, at)
      }
    }
    return copy.toString()
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
  return (tokens: ReadonlyArray<string>): string => {
    const parts: Array<string> = []
    const count = 1 + next(7)
    for (let i = 0; i < count; i++) {
      const token = tokens[next(tokens.length)]!
      switch (next(9)) {
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
    it.live(`answers as the search for each token does, with ${credentials + 1} live tokens`, () =>
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
})
