import { readFileSync } from 'node:fs';
import { connect, createServer, type TLSSocket } from 'node:tls';
import t from 'tap';
import { makeCerts } from './tls.js';

t.test('makeCerts: a client with the client cert completes mTLS to 127.0.0.1 and localhost', async (t) => {
  const certs = await makeCerts();
  t.teardown(() => certs.remove());
  const pem = certs.pem();
  const server = createServer({
    cert: pem.cert,
    key: pem.key,
    ca: pem.ca,
    requestCert: true,
    rejectUnauthorized: true,
  });
  const peers: string[] = [];
  server.on('secureConnection', (s: TLSSocket) => {
    const peer = s.getPeerCertificate();
    peers.push(`${peer.subject.CN} ${peer.subjectaltname}`);
    s.end('hi');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const port = (server.address() as { port: number }).port;

  for (const host of ['127.0.0.1', 'localhost']) {
    const reply = await new Promise<string>((resolve, reject) => {
      const s = connect({ host, port, ca: pem.ca, cert: pem.clientCert, key: pem.clientKey }, () => {
        s.setEncoding('utf8');
        let data = '';
        s.on('data', (d) => (data += d));
        s.on('end', () => resolve(data));
      });
      s.on('error', reject);
    });
    t.equal(reply, 'hi', `mTLS to ${host}`);
  }
  t.same(peers, ['client.test DNS:client.test', 'client.test DNS:client.test']);
  t.match(readFileSync(certs.caPath, 'utf8'), /BEGIN CERTIFICATE/);

  // without a client certificate the server rejects the handshake
  await t.rejects(
    new Promise<void>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port, ca: pem.ca }, () => {
        s.on('data', () => resolve());
        s.on('end', () => reject(new Error('closed')));
      });
      s.on('error', reject);
    }),
  );
});

t.test('makeCerts honours serverNames and clientName', async (t) => {
  const certs = await makeCerts(undefined, {
    serverNames: ['ratelimit.test', '::1'],
    clientName: 'envoy.test',
  });
  t.teardown(() => certs.remove());
  const { X509Certificate } = await import('node:crypto');
  const server = new X509Certificate(readFileSync(certs.certPath));
  const client = new X509Certificate(readFileSync(certs.clientCertPath));
  t.match(server.subjectAltName, /DNS:ratelimit\.test/);
  t.match(server.subjectAltName, /IP Address:0:0:0:0:0:0:0:1/);
  t.equal(client.subjectAltName, 'DNS:envoy.test');
  t.ok(server.verify(new X509Certificate(readFileSync(certs.caPath)).publicKey));
});
