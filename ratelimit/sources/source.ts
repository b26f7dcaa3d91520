// What a config source is, whatever it reads (files: file.ts; an xDS control plane: xds.ts): it starts,
// it closes, and it hands each new config, or the error that refused one, to the app. A refused config
// never replaces the one serving.
import type { Logger } from '../../common/index.js';
import type { ConfigFeature, RateLimitConfig } from '../config/index.js';
import type { Settings } from '../settings/index.js';

export interface ConfigSource {
  start(): Promise<void>;
  close(): Promise<void>;
}

/** A new config (with the names it was read from), or why the last read was refused. */
export type ConfigUpdate = { config: RateLimitConfig; sources: string[] } | { error: Error };

/** What a source built from the settings needs from the app that serves its configs. */
export interface ConfigSourceDeps {
  settings: Settings;
  logger: Logger;
  /** The config features this pod enforces (told to an xDS control plane). */
  features(): readonly ConfigFeature[];
  /** Serves a config; throws when the app refuses it (the serving config stays). */
  setConfig(config: RateLimitConfig): void;
  /** Reports a refused config (counted and logged; the serving config stays). */
  onUpdate(update: ConfigUpdate): void;
}
