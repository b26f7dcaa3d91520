// Real Redis for tests and benchmarks: a single server (password, ACL users, TLS, unix socket),
// a Redis Cluster, and a Sentinel group, each on free loopback ports in its own temp dir.
// Every process is a child we spawned with daemonize off and is stopped by its handle only.
// Readiness and topology checks speak RESP over a plain socket (resp.ts: no client reconnect logic to
// second-guess); tests get ioredis clients from client()/clusterClient(). fake.ts is the one stand-in: a
// server that sends the replies a real Redis never does.
export { RespError, redisInfo, respCommand, respCommands, type RespTarget, type RespValue } from './resp.js';
export {
  RedisServer,
  startRedis,
  type RedisTlsPaths,
  type RedisUser,
  type StartRedisOptions,
} from './server.js';
export {
  RedisCluster,
  slotOf,
  startRedisCluster,
  type ClusterNodeHandle,
  type ClusterNodeInfo,
  type FailoverResult,
  type KilledMaster,
  type StartRedisClusterOptions,
} from './cluster.js';
export {
  RedisSentinelGroup,
  startRedisSentinel,
  type SentinelFailoverResult,
  type StartRedisSentinelOptions,
} from './sentinel.js';
export { bulk, startFakeRedis, type FakeAnswer, type FakeRedis } from './fake.js';
