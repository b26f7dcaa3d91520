// Test certificates made with the openssl CLI: a CA, a server certificate and a client
// certificate signed by it. Used by the Redis TLS harness and by gRPC mTLS tests.
// EC P-256 keys: generating them takes milliseconds, unlike RSA.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { makeTempDir, removeTempDir } from './net.js';

const execFileP = promisify(execFile);

export interface MakeCertsOptions {
  /** Names the server certificate is valid for; IP literals become IP SANs (default localhost, 127.0.0.1). */
  serverNames?: string[];
  /** CN and DNS SAN of the client certificate (default client.test). */
  clientName?: string;
  /** Validity in days (default 2). */
  days?: number;
}

export interface CertPaths {
  dir: string;
  caPath: string;
  caKeyPath: string;
  /** Server certificate and key. */
  certPath: string;
  keyPath: string;
  clientCertPath: string;
  clientKeyPath: string;
  /** The client's certificate names, for assertions (e.g. mTLS identity checks). */
  clientName: string;
  serverNames: string[];
}

export interface Certs extends CertPaths {
  /** PEM contents, read once, for APIs that take buffers (grpc-js, tls.connect). */
  pem(): { ca: Buffer; cert: Buffer; key: Buffer; clientCert: Buffer; clientKey: Buffer };
  /** Remove the directory, only if makeCerts created it. Idempotent. */
  remove(): void;
}

const REQ_CONFIG = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
`;

function leafExtensions(usage: 'serverAuth' | 'clientAuth', names: string[]): string {
  const san = names.map((n) => (isIP(n) ? `IP:${n}` : `DNS:${n}`)).join(',');
  return [
    'basicConstraints = CA:FALSE',
    'keyUsage = critical,digitalSignature,keyEncipherment',
    `extendedKeyUsage = ${usage}`,
    `subjectAltName = ${san}`,
    'authorityKeyIdentifier = keyid',
    '',
  ].join('\n');
}

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await execFileP('openssl', args, { cwd });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`openssl ${args.slice(0, 2).join(' ')} failed: ${e.stderr?.trim() || e.message}`, {
      cause: err,
    });
  }
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/**
 * Generate CA, server and client certificates into `dir` (a fresh temp dir when omitted).
 * Server cert: SANs from serverNames, EKU serverAuth. Client cert: CN/DNS SAN clientName, EKU clientAuth.
 */
export async function makeCerts(dir?: string, opts: MakeCertsOptions = {}): Promise<Certs> {
  const owned = dir === undefined;
  const out = dir ?? makeTempDir('rl-certs');
  mkdirSync(out, { recursive: true });
  const serverNames = opts.serverNames ?? ['localhost', '127.0.0.1'];
  const clientName = opts.clientName ?? 'client.test';
  const days = String(opts.days ?? 2);
  const p = (f: string) => join(out, f);
  const serial = () => `0x${randomBytes(8).toString('hex')}`;

  writeFileSync(p('openssl.cnf'), REQ_CONFIG);
  writeFileSync(p('server.ext'), leafExtensions('serverAuth', serverNames));
  writeFileSync(p('client.ext'), leafExtensions('clientAuth', [clientName]));

  // CA first; the two leaves are independent of each other.
  await openssl(
    [
      'req',
      '-x509',
      ...EC_KEY,
      '-config',
      'openssl.cnf',
      '-extensions',
      'v3_ca',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      days,
      '-subj',
      '/CN=ratelimit test CA',
    ],
    out,
  );
  const leaf = async (name: 'server' | 'client', cn: string) => {
    await openssl(
      [
        'req',
        '-new',
        ...EC_KEY,
        '-config',
        'openssl.cnf',
        '-keyout',
        `${name}.key`,
        '-out',
        `${name}.csr`,
        '-subj',
        `/CN=${cn}`,
      ],
      out,
    );
    await openssl(
      [
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        'ca.crt',
        '-CAkey',
        'ca.key',
        '-set_serial',
        serial(),
        '-days',
        days,
        '-out',
        `${name}.crt`,
        '-extfile',
        `${name}.ext`,
      ],
      out,
    );
  };
  await Promise.all([leaf('server', serverNames[0] ?? 'localhost'), leaf('client', clientName)]);

  const paths: CertPaths = {
    dir: out,
    caPath: p('ca.crt'),
    caKeyPath: p('ca.key'),
    certPath: p('server.crt'),
    keyPath: p('server.key'),
    clientCertPath: p('client.crt'),
    clientKeyPath: p('client.key'),
    clientName,
    serverNames,
  };
  return {
    ...paths,
    pem: () => ({
      ca: readFileSync(paths.caPath),
      cert: readFileSync(paths.certPath),
      key: readFileSync(paths.keyPath),
      clientCert: readFileSync(paths.clientCertPath),
      clientKey: readFileSync(paths.clientKeyPath),
    }),
    remove: () => {
      if (owned) removeTempDir(out);
    },
  };
}
