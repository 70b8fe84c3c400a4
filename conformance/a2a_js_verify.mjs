// Verify an Agent Card with a2a-js's own verifier (@a2a-js/sdk verifyAgentCardSignature).
//
//   npm install @a2a-js/sdk jose        (in any folder; run node from there or set NODE_PATH)
//   node conformance/a2a_js_verify.mjs http://127.0.0.1:9999/      [bearer-token]
//
// Fetches <base>/.well-known/agent-card.json and the JWKS named by the signature's jku,
// verifies, and prints "a2a-js: verified kid=<kid> alg=<alg>" or the error (exit 1).
import { verifyAgentCardSignature } from "@a2a-js/sdk";
import * as jose from "jose";

const base = (process.argv[2] || "http://127.0.0.1:9999/").replace(/\/?$/, "/");
const headers = process.argv[3] ? { Authorization: `Bearer ${process.argv[3]}` } : {};
const card = await (await fetch(base + ".well-known/agent-card.json", { headers })).json();
const protectedHeader = JSON.parse(Buffer.from(card.signatures[0].protected, "base64url").toString());
const verify = verifyAgentCardSignature(async (kid, jku) => {
  const jwks = await (await fetch(jku || base + ".well-known/jwks.json", { headers })).json();
  const jwk = jwks.keys.find((k) => k.kid === kid);
  if (!jwk) throw new Error(`no key ${kid} in the JWKS`);
  return await jose.importJWK(jwk, protectedHeader.alg);
});
try {
  await verify(card);
  console.log(`a2a-js: verified kid=${protectedHeader.kid} alg=${protectedHeader.alg}`);
} catch (err) {
  console.log(`a2a-js: FAILED ${err}`);
  process.exit(1);
}
