/**
 * The transports, composed from `@effect/cluster`'s parts with a `ShardingConfig` built from the
 * options alone: `NodeClusterSocket.layer` and `SingleRunner.layer` read the process environment
 * (`ShardingConfig.layerFromEnv`), where a generic `PORT` / `HOST` would become the runner's
 * address and a malformed one would fail the runner.
 *
 * @internal
 */
import type * as MessageStorage from "@effect/cluster/MessageStorage"
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as TestRunner from "@effect/cluster/TestRunner"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import type * as SocketServer from "@effect/platform/SocketServer"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import type * as Runner from "../Runner.js"

/** @internal */
export const tuned: Runner.Timing = {
  shardLockRefreshInterval: "2 seconds",
  shardLockExpiration: "8 seconds",
  refreshAssignmentsInterval: "1 second",
  runnerHealthCheckInterval: "2 seconds",
  entityMessagePollInterval: "1 second",
  entityReplyPollInterval: "100 millis",
  sendRetryInterval: "100 millis"
}

const timingConfig = (timing: Runner.Timing | undefined): Partial<ShardingConfig.ShardingConfig["Type"]> => {
  const out: { -readonly [K in keyof Runner.Timing]-?: Duration.Duration } = {} as never
  for (const [name, value] of Object.entries(timing ?? {})) {
    if (value !== undefined) (out as Record<string, Duration.Duration>)[name] = Duration.decode(value)
  }
  return out
}

const config = (
  address: Option.Option<RunnerAddress.RunnerAddress>,
  listen: Option.Option<RunnerAddress.RunnerAddress>,
  options: Runner.CommonOptions
): Layer.Layer<ShardingConfig.ShardingConfig> =>
  ShardingConfig.layer({
    ...ShardingConfig.defaults,
    ...timingConfig(options.timing),
    ...(options.shardsPerGroup === undefined ? {} : { shardsPerGroup: options.shardsPerGroup }),
    ...(options.weight === undefined ? {} : { runnerShardWeight: options.weight }),
    runnerAddress: address,
    runnerListenAddress: listen
  })

// Runners starting together on an empty PostgreSQL database race to create the cluster's tables
// (concurrent CREATE TABLE, even IF NOT EXISTS, can fail there, and the message storage turns its
// migration failure into a defect): the losers build the layer again after a random pause (fresh:
// a layer is memoized within one build, so it would give the same failure).
const retried = <A, E, R>(layer: Layer.Layer<A, E, R>, times: number): Layer.Layer<A, E, R> =>
  times === 0 ? layer : Layer.catchAllCause(layer, (cause) =>
    Cause.isInterruptedOnly(cause)
      ? Layer.failCause(cause)
      : Layer.unwrapEffect(
        Effect.as(Effect.flatMap(Random.nextIntBetween(20, 200), Effect.sleep), retried(Layer.fresh(layer), times - 1))
      ))
const messageStorage = Layer.orDie(retried(SqlMessageStorage.layer, 8))
const runnerStorage = Layer.orDie(retried(SqlRunnerStorage.layer, 8))

const serialization = (options: Runner.SocketOptions | Runner.ClientOptions) =>
  options.serialization === "ndjson" ? RpcSerialization.layerNdjson : RpcSerialization.layerMsgPack

/** @internal */
export const layerSocket = (
  options: Runner.SocketOptions
): Layer.Layer<
  Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage,
  SocketServer.SocketServerError,
  SqlClient.SqlClient
> => {
  const address = RunnerAddress.make(options.address.host, options.address.port)
  const listen = options.listen === undefined
    ? Option.none()
    : Option.some(RunnerAddress.make(options.listen.host, options.listen.port))
  const health = RunnerHealth.layerPing.pipe(
    Layer.provide(Runners.layerRpc),
    Layer.provide(NodeClusterSocket.layerClientProtocol)
  )
  return SocketRunner.layer.pipe(
    Layer.provide([NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol]),
    Layer.provide(health),
    Layer.provideMerge(messageStorage),
    Layer.provide(runnerStorage),
    Layer.provide(config(Option.some(address), listen, options)),
    Layer.provide(serialization(options))
  )
}

/** @internal */
export const layerClient = (
  options: Runner.ClientOptions
): Layer.Layer<Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage, never, SqlClient.SqlClient> =>
  SocketRunner.layerClientOnly.pipe(
    Layer.provide(NodeClusterSocket.layerClientProtocol),
    Layer.provideMerge(messageStorage),
    Layer.provide(runnerStorage),
    Layer.provide(config(Option.none(), Option.none(), options)),
    Layer.provide(serialization(options))
  )

// One process owns every shard: its address is only its name in the runner storage.
const singleAddress = RunnerAddress.make("127.0.0.1", 34431)

/** @internal */
export const layerSingle = (
  options: Runner.SingleOptions = {}
): Layer.Layer<Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage, never, SqlClient.SqlClient> =>
  Sharding.layer.pipe(
    Layer.provideMerge(Runners.layerNoop),
    Layer.provideMerge(messageStorage),
    Layer.provide([
      options.runnerStorage === "memory" ? RunnerStorage.layerMemory : runnerStorage,
      RunnerHealth.layerNoop
    ]),
    Layer.provide(config(Option.some(singleAddress), Option.none(), options))
  )

/** @internal */
export const layerTest = TestRunner.layer
