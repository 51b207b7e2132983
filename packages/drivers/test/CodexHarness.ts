/**
 * The Codex driver the tests run offline: the pinned CLI against a scripted Responses server on
 * 127.0.0.1 (`baseUrl`), a fake key, no retries (a failure shows at once), Codex's offline settings.
 */
import { Codex } from "@tether/drivers"
import * as Redacted from "effect/Redacted"

export const offlineCodex = (baseUrl: string, options: { readonly binary?: string } = {}) =>
  Codex.driver({
    model: "fake-model",
    ...(options.binary === undefined ? {} : { binary: options.binary }),
    modelProvider: {
      id: "fake",
      baseUrl,
      apiKey: Redacted.make("sk-fake-codex"),
      requestMaxRetries: 0,
      streamMaxRetries: 0
    },
    settings: Codex.offlineSettings
  })
