// The `ratelimit` binary: settings from the environment, then the app, until SIGTERM/SIGINT. It ends as
// every program does (common/program.ts): an invalid setting is bad usage (exit 2), a failure to start
// exits 1 with one `ratelimit: <message>` line, after the same message as a fatal log line.
import { RateLimitApp, SHUTDOWN_EXIT_SLACK_MS } from './app.js';
import { createLogger, failureMessage, parseLogLevel, runProgram, UsageError } from '../common/index.js';
import { loadSettings, SettingsError } from './settings/index.js';
import type { ConfigSourceDeps } from './sources/index.js';
import { loadTracing } from './tracing/index.js';

async function main(): Promise<number> {
  let settings;
  try {
    settings = loadSettings(process.env);
  } catch (err) {
    if (err instanceof SettingsError) throw new UsageError(`invalid setting ${err.message}`);
    throw err;
  }
  if (!parseLogLevel(settings.logLevel)) {
    // The reference's behaviour and words: a fatal line, exit 1.
    createLogger({ format: settings.logFormat }).fatal(
      `Could not parse log level. not a valid logrus Level: ${JSON.stringify(settings.logLevel)}`,
    );
    return 1;
  }
  const logger = createLogger({ level: settings.logLevel, format: settings.logFormat });
  const tracing = await loadTracing(settings.tracing, { logger });
  // The xDS client (and grpc-js under it) loads only with CONFIG_TYPE=GRPC_XDS_SOTW or GRPC_XDS_DELTA.
  const xdsSourceFactory = async (deps: ConfigSourceDeps) =>
    (await import('./sources/xds.js')).createXdsSource(deps);
  const app = new RateLimitApp({ settings, logger, xdsSourceFactory, tracing });
  let stopping = false;
  let stopped!: (code: number) => void;
  const exitCode = new Promise<number>((resolve) => (stopped = resolve));
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info(`received ${signal}, shutting down gracefully`);
    // Nothing may hold the exit past the drain time (a stuck store, a hung peer): a last resort.
    const exitByMs = settings.shutdownDrainMs + SHUTDOWN_EXIT_SLACK_MS;
    setTimeout(() => {
      logger.error(`shutdown did not finish within ${exitByMs} ms; exiting`);
      process.exit(1);
    }, exitByMs).unref();
    app.close(settings.shutdownDrainMs).then(
      () => stopped(0),
      (err) => {
        logger.error({ err }, 'error during shutdown');
        stopped(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  try {
    await app.start();
  } catch (err) {
    logger.fatal(`startup failed: ${failureMessage(err as Error)}`);
    throw err;
  }
  return exitCode;
}

runProgram('ratelimit', main);
