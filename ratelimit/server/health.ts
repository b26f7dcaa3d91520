// Overall health = every enabled component healthy (as the reference's health checker). Components:
// `cache` (only with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION), `config` (only with
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED), `sigterm` (always; fails once termination starts).
import { EventEmitter } from 'node:events';

export class HealthChecker extends EventEmitter {
  private readonly components = new Map<string, boolean>();
  private readonly probes = new Map<string, () => boolean>();

  /** A component with a fixed state changed by ok()/fail(). */
  add(name: string, initiallyHealthy: boolean): void {
    this.components.set(name, initiallyHealthy);
    this.emit('change', this.isHealthy());
  }

  /** A component whose state is read when asked (e.g. the cache connection). */
  addProbe(name: string, probe: () => boolean): void {
    this.probes.set(name, probe);
  }

  ok(name: string): void {
    this.set(name, true);
  }

  fail(name: string): void {
    this.set(name, false);
  }

  private set(name: string, healthy: boolean): void {
    if (!this.components.has(name)) throw new Error(`unknown health component '${name}'`);
    const before = this.isHealthy();
    this.components.set(name, healthy);
    if (before !== this.isHealthy()) this.emit('change', this.isHealthy());
  }

  /** The failing components, empty when healthy. */
  failing(): string[] {
    const out: string[] = [];
    for (const [name, healthy] of this.components) if (!healthy) out.push(name);
    for (const [name, probe] of this.probes) if (!probe()) out.push(name);
    return out;
  }

  isHealthy(): boolean {
    return this.failing().length === 0;
  }
}
