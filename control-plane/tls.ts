// TLS for the xDS server from certificate files that rotate under it (cert-manager renewing a mounted
// Secret): the files are re-read on an interval and new connections get the new certificate and CA;
// open streams keep theirs. A file that is unreadable or does not make a valid TLS context (a half-written
// rotation, a key that does not match its certificate) is logged and the previous certificate keeps
// serving. grpc-js' own FileWatcherCertificateProvider drops every new connection in that case, hence
// this small provider on grpc-js' public (experimental) CertificateProvider interface.
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../common/index.js';

type CaUpdate = grpc.experimental.CaCertificateUpdate;
type IdentityUpdate = grpc.experimental.IdentityCertificateUpdate;

export interface TlsFiles {
  /** PEM certificate chain of the server. */
  readonly certFile: string;
  readonly keyFile: string;
  /** PEM CA bundle to verify client certificates with; required for mutual TLS. */
  readonly caFile?: string;
  /** Mutual TLS: reject clients without a certificate signed by caFile (default true when caFile is set). */
  readonly requireClientCert?: boolean;
  /** How often the files are re-read (default 10 s). */
  readonly reloadIntervalMs?: number;
}

interface Pem {
  cert: Buffer;
  key: Buffer;
  ca: Buffer | undefined;
}

const samePem = (a: Pem, b: Pem) =>
  a.cert.equals(b.cert) && a.key.equals(b.key) && (a.ca && b.ca ? a.ca.equals(b.ca) : a.ca === b.ca);

/** Certificate, key and CA files, re-read on an interval; listeners hear only valid changes. */
export class ReloadingTlsFiles implements grpc.experimental.CertificateProvider {
  private current: Pem;
  private timer: NodeJS.Timeout | undefined;
  private lastError = '';
  private readonly caListeners = new Set<(u: CaUpdate | null) => void>();
  private readonly identityListeners = new Set<(u: IdentityUpdate | null) => void>();

  /** Reads and checks the files now: a server never starts on files it cannot serve. */
  constructor(
    private readonly files: TlsFiles,
    private readonly log: Logger,
  ) {
    this.current = this.read();
  }

  private read(): Pem {
    const f = this.files;
    const pem: Pem = {
      cert: readFileSync(f.certFile),
      key: readFileSync(f.keyFile),
      ca: f.caFile ? readFileSync(f.caFile) : undefined,
    };
    createSecureContext(pem); // throws on a mismatched key, a bad PEM or a bad CA bundle
    return pem;
  }

  /** Starts re-reading the files; stop with close(). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.reload(), this.files.reloadIntervalMs ?? 10_000);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Re-reads the files now; true when new certificates were taken. */
  reload(): boolean {
    let next: Pem;
    try {
      next = this.read();
    } catch (err) {
      const message = (err as Error).message;
      if (message !== this.lastError) {
        this.lastError = message;
        this.log.error(
          { err: message, certFile: this.files.certFile },
          'xDS TLS files unreadable or invalid; new connections keep the previous certificate',
        );
      }
      return false;
    }
    this.lastError = '';
    if (samePem(next, this.current)) return false;
    this.current = next;
    this.log.warn({ certFile: this.files.certFile }, 'xDS TLS files changed: new connections use them');
    for (const l of this.identityListeners) l(this.identity());
    for (const l of this.caListeners) l(this.ca());
    return true;
  }

  private identity(): IdentityUpdate {
    return { certificate: this.current.cert, privateKey: this.current.key };
  }

  private ca(): CaUpdate | null {
    return this.current.ca ? { caCertificate: this.current.ca } : null;
  }

  addCaCertificateListener(listener: (u: CaUpdate | null) => void): void {
    this.caListeners.add(listener);
    process.nextTick(listener, this.ca());
  }

  removeCaCertificateListener(listener: (u: CaUpdate | null) => void): void {
    this.caListeners.delete(listener);
  }

  addIdentityCertificateListener(listener: (u: IdentityUpdate | null) => void): void {
    this.identityListeners.add(listener);
    process.nextTick(listener, this.identity());
  }

  removeIdentityCertificateListener(listener: (u: IdentityUpdate | null) => void): void {
    this.identityListeners.delete(listener);
  }
}

/** Server credentials that follow the files; `provider` must be started and closed by the caller. */
export function reloadingServerCredentials(
  files: TlsFiles,
  provider: ReloadingTlsFiles,
): grpc.ServerCredentials {
  const mutual = !!files.caFile;
  // grpc-js passes its first argument on as the identity provider and its second as the CA provider.
  return grpc.experimental.createCertificateProviderServerCredentials(
    provider,
    mutual ? provider : null,
    mutual ? (files.requireClientCert ?? true) : false,
  );
}
