// TLS for the xDS server from certificate files that rotate under it (cert-manager renewing a mounted
// Secret): the files are re-read on an interval and new connections get the new certificate and CA;
// open streams keep theirs. A file that is unreadable or does not make a valid TLS context (a half-written
// rotation, a key that does not match its certificate) is logged and the previous certificate keeps
// serving. grpc-js' own FileWatcherCertificateProvider drops every new connection in that case, hence
// this small provider on grpc-js' public (experimental) CertificateProvider interface.
import * as grpc from '@grpc/grpc-js';
import { TlsFileWatcher, type Logger } from '../common/index.js';

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

/**
 * Certificate, key and CA files, re-read on an interval (common/tls-files.ts keeps the last good set);
 * grpc-js' listeners hear only valid changes.
 */
export class ReloadingTlsFiles implements grpc.experimental.CertificateProvider {
  private readonly files: TlsFileWatcher;
  private readonly caListeners = new Set<(u: CaUpdate | null) => void>();
  private readonly identityListeners = new Set<(u: IdentityUpdate | null) => void>();

  /** Reads and checks the files now: a server never starts on files it cannot serve. */
  constructor(files: TlsFiles, log: Logger) {
    if (!files.certFile || !files.keyFile) throw new Error('xDS TLS needs a certificate file and a key file');
    this.files = new TlsFileWatcher(files, {
      intervalMs: files.reloadIntervalMs,
      onError: (err) =>
        log.error(
          { err: err.message, certFile: files.certFile },
          'xDS TLS files unreadable or invalid; new connections keep the previous certificate',
        ),
      onChange: () => {
        log.info({ certFile: files.certFile }, 'xDS TLS files changed: new connections use them');
        for (const l of this.identityListeners) l(this.identity());
        for (const l of this.caListeners) l(this.ca());
      },
    });
  }

  /** Starts re-reading the files; stop with close(). */
  start(): void {
    this.files.start();
  }

  close(): void {
    this.files.close();
  }

  /** Re-reads the files now; true when new certificates were taken. */
  reload(): Promise<boolean> {
    return this.files.reload();
  }

  private identity(): IdentityUpdate {
    const pem = this.files.current;
    return { certificate: pem.cert!, privateKey: pem.key! };
  }

  private ca(): CaUpdate | null {
    const ca = this.files.current.ca;
    return ca ? { caCertificate: ca } : null;
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
