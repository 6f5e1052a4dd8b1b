// The plugin's side of go-plugin's AutoMTLS: a fresh self-signed
// certificate for every process, shaped like the one go-plugin's own
// generateCert makes (CN and DNS name "localhost", a CA usable for client
// and server auth), so the host, which puts it in its RootCAs, accepts it.
//
// Node's crypto makes the key and the signature; it has no API that builds
// a certificate, so the DER of this one fixed shape is written here (see
// RATIONALE.md, "TypeScript SDK: the certificate without a library").

import { generateKeyPairSync, randomBytes, sign, KeyObject } from "node:crypto";

/** A certificate and its key, as the TLS server needs them. */
export interface ServerCert {
  /** The certificate, PEM. */
  certPem: string;
  /** The private key, PKCS#8 PEM. */
  keyPem: string;
  /** The certificate, DER: go-plugin's handshake line carries it in base64. */
  der: Buffer;
}

/** Validity of the certificate, as go-plugin's: 262980 hours (30 years). */
const validityMs = 262980 * 3600 * 1000;

/**
 * newServerCert generates an ECDSA P-256 key and a self-signed certificate
 * for "localhost". The serial number is 16 random bytes unless given (the
 * tests give the ones DER encodes specially).
 */
export function newServerCert(now: Date = new Date(), serial: Buffer = randomBytes(16)): ServerCert {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const der = selfSigned(publicKey, privateKey, now, serial);
  const b64 = der.toString("base64").replace(/(.{64})/g, "$1\n").replace(/\n$/, "");
  return {
    certPem: `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`,
    keyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    der,
  };
}

function selfSigned(pub: KeyObject, priv: KeyObject, now: Date, serial: Buffer): Buffer {
  const ecdsaWithSHA256 = seq(oid("2a8648ce3d040302"));
  const name = seq(
    set(seq(oid("550403"), tlv(0x0c, Buffer.from("localhost")))),
    set(seq(oid("55040a"), tlv(0x0c, Buffer.from("agentkernel")))),
  );
  const tbs = seq(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))), // version v3
    integer(serial),
    ecdsaWithSHA256,
    name,
    seq(time(new Date(now.getTime() - 30_000)), time(new Date(now.getTime() + validityMs))),
    name,
    pub.export({ type: "spki", format: "der" }),
    tlv(0xa3, seq(
      // subjectAltName: dNSName localhost
      ext("551d11", false, seq(tlv(0x82, Buffer.from("localhost")))),
      // basicConstraints: CA
      ext("551d13", true, seq(tlv(0x01, Buffer.from([0xff])))),
      // keyUsage: digitalSignature, keyEncipherment, keyAgreement, keyCertSign
      ext("551d0f", true, tlv(0x03, Buffer.from([0x02, 0xac]))),
      // extKeyUsage: serverAuth, clientAuth
      ext("551d25", false, seq(oid("2b06010505070301"), oid("2b06010505070302"))),
    )),
  );
  const sig = sign("sha256", tbs, priv); // DER ECDSA-Sig-Value
  return seq(tbs, ecdsaWithSHA256, tlv(0x03, Buffer.concat([Buffer.from([0]), sig])));
}

// DER: tag, length, value.
function tlv(tag: number, value: Buffer): Buffer {
  const n = value.length;
  let len: Buffer;
  if (n < 0x80) len = Buffer.from([n]);
  else if (n < 0x100) len = Buffer.from([0x81, n]);
  else if (n < 0x10000) len = Buffer.from([0x82, n >> 8, n & 0xff]);
  else throw new Error("DER value too long");
  return Buffer.concat([Buffer.from([tag]), len, value]);
}

// integer encodes the unsigned big-endian b as a DER INTEGER: minimal (no
// leading zero byte unless the next byte's top bit is set, which OpenSSL
// refuses as "illegal padding") and positive.
export function integer(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  const v = b.subarray(i);
  return tlv(0x02, v.length > 0 && v[0] & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : Buffer.from(v.length > 0 ? v : [0]));
}

const seq = (...items: Buffer[]): Buffer => tlv(0x30, Buffer.concat(items));
const set = (...items: Buffer[]): Buffer => tlv(0x31, Buffer.concat(items));
const oid = (hex: string): Buffer => tlv(0x06, Buffer.from(hex, "hex"));

function ext(id: string, critical: boolean, value: Buffer): Buffer {
  const parts = [oid(id)];
  if (critical) parts.push(tlv(0x01, Buffer.from([0xff])));
  parts.push(tlv(0x04, value));
  return seq(...parts);
}

// time encodes t as RFC 5280 wants: UTCTime before 2050, GeneralizedTime from then on.
function time(t: Date): Buffer {
  const p = (n: number) => String(n).padStart(2, "0");
  const rest = `${p(t.getUTCMonth() + 1)}${p(t.getUTCDate())}${p(t.getUTCHours())}${p(t.getUTCMinutes())}${p(t.getUTCSeconds())}Z`;
  const y = t.getUTCFullYear();
  if (y < 2050) return tlv(0x17, Buffer.from(p(y % 100) + rest));
  return tlv(0x18, Buffer.from(String(y) + rest));
}
