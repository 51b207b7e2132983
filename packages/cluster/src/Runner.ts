/**
 * Where threads run: the `@effect/cluster` transports a host chooses from, each giving
 * `Sharding` (what `ThreadEntity.layer` and `ThreadEntity.client` need).
 *
 * - `layerSocket`: one runner of a fleet. Runners find each other and their shards through the
 *   SQL database they share (`@effect/sql-pg` for a fleet) and talk over TCP; a killed runner's
 *   threads move to a survivor once its shard locks expire.
 * - `layerClient`: a host that only calls threads (it runs none).
 * - `layerSingle`: one process owns every shard, durable on SQL (SQLite is the embedded default).
 * - `layerTest`: in memory, for tests (`Entity.makeTestClient` needs no sharding at all).
 *
 * Nothing is read from the environment: the runner address is always the one given (with
 * `@effect/cluster`'s own layers a generic `PORT` / `HOST` variable would become it).
 *
 * @since 0.1.0
 */
import type * as MessageStorage from "@effect/cluster/MessageStorage"
import type * as Runners from "@effect/cluster/Runners"
import type * as Sharding from "@effect/cluster/Sharding"
import type * as SocketServer from "@effect/platform/SocketServer"
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Duration from "effect/Duration"
import type * as Layer from "effect/Layer"
import * as internal from "./internal/runner.js"

/**
 * The timing knobs of `@effect/cluster` (its defaults in parentheses). Failover after a runner
 * dies is bounded by its shard locks' expiry (on PostgreSQL they go with the dead runner's
 * connections, so usually sooner) plus `refreshAssignmentsInterval`; a turn the dead runner was
 * running also waits out its ThreadStore lease (`Agent.Options.threads.leaseTtl`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Timing {
  /**
   * How often a runner refreshes its shard locks (10 s; at most a third of the expiration). A
   * refresh that takes longer than this interval makes the runner give up its shards.
   */
  readonly shardLockRefreshInterval?: Duration.DurationInput
  /** How long a dead runner's shard locks keep its shards (35 s). */
  readonly shardLockExpiration?: Duration.DurationInput
  /** How often runners and shard assignments are re-read (3 s). */
  readonly refreshAssignmentsInterval?: Duration.DurationInput
  /** How often runners ping each other to find dead ones (1 min). */
  readonly runnerHealthCheckInterval?: Duration.DurationInput
  /** How often stored messages are polled for (10 s). */
  readonly entityMessagePollInterval?: Duration.DurationInput
  /** How often a caller polls for a reply stored by another runner (200 ms). */
  readonly entityReplyPollInterval?: Duration.DurationInput
  /** How long a send to a shard that has no runner waits before it is tried again (100 ms). */
  readonly sendRetryInterval?: Duration.DurationInput
  /** An entity idle this long is stopped: its thread's agent closes (1 min). */
  readonly entityMaxIdleTime?: Duration.DurationInput
  /** How long a stopping entity may take (15 s). */
  readonly entityTerminationTimeout?: Duration.DurationInput
}

/**
 * Short failover (measured with three runners on one machine: a thread of a SIGKILLed runner
 * answered again after about 5 s, against about 33 s with the defaults): shard locks of 8 s refreshed every 2 s,
 * assignments re-read every second, health checks every 2 s, stored messages polled every second.
 * A runner whose lock refresh takes longer than its interval (here 2 s: a stalled process or
 * database) gives up its shards and interrupts its entities, so do not go much lower on busy
 * machines. More database traffic than the defaults; pair it with a short thread lease
 * (`Agent.Options.threads.leaseTtl`, e.g. 5 s).
 *
 * @since 0.1.0
 * @category constants
 */
export const tuned: Timing = internal.tuned

/**
 * What every kind of member (runner or client) configures alike. `shardsPerGroup` must be the same
 * on every member of one cluster, or shards are assigned differently and messages are lost to the
 * wrong runner.
 *
 * @since 0.1.0
 * @category models
 */
export interface CommonOptions {
  readonly timing?: Timing
  /** Shards per group; must be the same on every runner and client (default 300). */
  readonly shardsPerGroup?: number
  /** This runner's share of the shards relative to the others (default 1). */
  readonly weight?: number
}

/**
 * A socket runner: the address the others reach it at (required), where it listens when that
 * differs, and the wire format, which must be the same on every member.
 *
 * @since 0.1.0
 * @category models
 */
export interface SocketOptions extends CommonOptions {
  /** The address other runners and clients reach this runner at. Required. */
  readonly address: { readonly host: string; readonly port: number }
  /** Where to listen, when it differs from `address` (e.g. `0.0.0.0` in a container). */
  readonly listen?: { readonly host: string; readonly port: number }
  /** Wire format between runners (default `msgpack`). */
  readonly serialization?: "msgpack" | "ndjson"
}

/**
 * A client-only member: it sends to the runners and hosts no entity. Its wire format must be the
 * runners' one.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClientOptions extends CommonOptions {
  readonly serialization?: "msgpack" | "ndjson"
}

/**
 * A single runner in this process (no socket): every shard is its own; messages are still
 * persisted in SQL so a restarted host resumes them.
 *
 * @since 0.1.0
 * @category models
 */
export interface SingleOptions extends CommonOptions {
  /** Where the runner registry lives (default `sql`, next to the messages). */
  readonly runnerStorage?: "sql" | "memory"
}

/**
 * One runner of a fleet: listens on `address` (or `listen`), registers in the shared SQL
 * database, takes its share of the shards, pings the other runners, and stores every persisted
 * message (a turn) in SQL so a survivor runs it when this runner dies.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSocket: (
  options: SocketOptions
) => Layer.Layer<
  Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage,
  SocketServer.SocketServerError,
  SqlClient.SqlClient
> = internal.layerSocket

/**
 * A member of a fleet that runs no thread: it only calls them (`ThreadEntity.client`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerClient: (
  options?: ClientOptions
) => Layer.Layer<Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage, never, SqlClient.SqlClient> = (
  options = {}
) => internal.layerClient(options)

/**
 * One process that owns every shard, its messages durable in SQL: the embedded default with
 * `@effect/sql-sqlite-node` (one machine; a restarted process runs the turns left pending).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSingle: (
  options?: SingleOptions
) => Layer.Layer<Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage, never, SqlClient.SqlClient> =
  internal.layerSingle

/**
 * An in-memory cluster of one runner (`@effect/cluster`'s `TestRunner`), for tests.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerTest: Layer.Layer<Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage> =
  internal.layerTest
