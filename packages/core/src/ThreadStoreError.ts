/**
 * The typed failures of a `ThreadStore`: a busy thread, a lost lease, an existing thread, and
 * the store itself failing. Also re-exported from `ThreadStore`.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * Another run holds the thread's lease.
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadBusy extends Schema.TaggedError<ThreadBusy>("@tether/core/ThreadBusy")("ThreadBusy", {
  key: Schema.String
}) {
  override get message(): string {
    return "another run holds this thread"
  }
}

/**
 * The lease expired or was taken over: nothing was persisted.
 *
 * @since 0.1.0
 * @category errors
 */
export class LeaseLost extends Schema.TaggedError<LeaseLost>("@tether/core/LeaseLost")("LeaseLost", {
  key: Schema.String
}) {
  override get message(): string {
    return "the thread's lease was lost; nothing was persisted"
  }
}

/**
 * A thread already exists under the key (e.g. the target of a fork).
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadAlreadyExists
  extends Schema.TaggedError<ThreadAlreadyExists>("@tether/core/ThreadAlreadyExists")("ThreadAlreadyExists", {
    key: Schema.String
  })
{
  override get message(): string {
    return "a thread already exists under this key"
  }
}

/**
 * The store itself failed (I/O, SQL).
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadStoreError
  extends Schema.TaggedError<ThreadStoreError>("@tether/core/ThreadStoreError")("ThreadStoreError", {
    operation: Schema.String,
    cause: Schema.Defect
  })
{
  override get message(): string {
    return `thread store failed to ${this.operation}`
  }
}
