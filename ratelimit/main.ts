// The `ratelimit` binary: settings from the environment, then the app, until SIGTERM/SIGINT.
import { RateLimitApp, SHUTDOWN_EXIT_SLACK_MS } from './app.js';
import { createLogger, parseLogLevel } from '../common/index.js';
import { loadSettings, SettingsError } from './settings/index.js';
import { createXdsSource } from './sources/index.js';
import { loadTracing } from './tracing/index.js';

async function main(): Promise<void> {
  let settings;
  try {
    settings = loadSettings(process.env);
  } catch (err) {
    if (err instanceof SettingsError) {
      process.stderr.write(`invalid setting ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  if (!parseLogLevel(settings.logLevel)) {
    // The reference's behaviour and words: a fatal line, exit 1.
    createLogger({ format: settings.logFormat }).fatal(
      `Could not parse log level. not a valid logrus Level: ${JSON.stringify(settings.logLevel)}`,
    );
    process.exit(1);
  }
  const logger = createLogger({ level: settings.logLevel, format: settings.logFormat });
  const tracing = await loadTracing(settings.tracing, { logger });
  const app = new RateLimitApp({ settings, logger, xdsSourceFactory: createXdsSource, tracing });
  let stopping = false;
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
      () => process.exit(0),
      (err) => {
        logger.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  try {
    await app.start();
  } catch (err) {
    logger.fatal(`startup failed: ${(err as Error).message}`);
    process.exit(1);
  }
}

void main();
