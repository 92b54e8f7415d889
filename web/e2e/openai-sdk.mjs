#!/usr/bin/env node
// The inference gateway driven by the official OpenAI Node SDK (the `openai`
// package, pinned in web/package-lock.json), as an application would call it.
//
//   node web/e2e/openai-sdk.mjs --base-url http://127.0.0.1:PORT/inference/v1 \
//        --key hfk_... --endpoint NAME --model-id ID
//
// tests/api/test_openai_sdk.py starts the server, an agent and a replica of
// tests/inference/fake_model.py behind endpoint NAME (key KEY, deployment
// model id ID), then runs this. Each SDK call prints "ok   CALL: what came
// back" or "FAIL: CALL: why"; the exit code is 1 when any failed, 2 on a
// usage error.
import OpenAI, { AuthenticationError, NotFoundError } from 'openai';

function args(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, '');
    if (!['base-url', 'key', 'endpoint', 'model-id'].includes(name) || argv[i + 1] === undefined) {
      console.error(`usage: openai-sdk.mjs --base-url URL --key KEY --endpoint NAME --model-id ID (bad: ${argv[i]})`);
      process.exit(2);
    }
    out[name] = argv[i + 1];
  }
  for (const need of ['base-url', 'key', 'endpoint', 'model-id']) {
    if (!out[need]) {
      console.error(`usage: --${need} is required`);
      process.exit(2);
    }
  }
  return out;
}

const opt = args(process.argv.slice(2));
const client = new OpenAI({ baseURL: opt['base-url'], apiKey: opt.key, maxRetries: 0, timeout: 30_000 });
let failed = 0;

function expect(cond, why) {
  if (!cond) throw new Error(why);
}

async function check(name, fn) {
  try {
    const said = await fn();
    console.log(`ok   ${name}: ${said}`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL: ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

await check('models.list', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  expect(ids.includes(opt.endpoint), `the key's endpoint ${opt.endpoint} not listed: ${JSON.stringify(ids)}`);
  return JSON.stringify(ids);
});

await check('models.retrieve', async () => {
  const m = await client.models.retrieve(opt.endpoint);
  expect(m.id === opt.endpoint && m.object === 'model', `got ${JSON.stringify(m)}`);
  expect(Number.isInteger(m.created) && m.created > 0, `created ${m.created}`);
  return JSON.stringify(m);
});

await check('chat.completions.create', async () => {
  const r = await client.chat.completions.create({
    model: opt.endpoint, messages: [{ role: 'user', content: 'hello sdk' }],
  });
  const text = r.choices[0].message.content;
  expect(text.includes('hello sdk'), `answer ${JSON.stringify(r)}`);
  // The replica's model id, as the gateway passed it on (docs/INFERENCE.md).
  expect(r.model === opt['model-id'], `model ${r.model}, want ${opt['model-id']}`);
  expect(r.usage && r.usage.total_tokens > 0, `usage ${JSON.stringify(r.usage)}`);
  return `${JSON.stringify(text)}, model ${r.model}`;
});

await check('chat.completions.create stream', async () => {
  const stream = await client.chat.completions.create({
    model: opt.endpoint, messages: [{ role: 'user', content: 'stream me' }],
    stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let chunks = 0;
  let usage = null;
  const models = new Set();
  for await (const chunk of stream) {
    chunks += 1;
    models.add(chunk.model);
    if (chunk.choices.length > 0) text += chunk.choices[0].delta.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  expect(chunks >= 2 && text.includes('stream me'), `${chunks} chunks, text ${JSON.stringify(text)}`);
  expect(models.size === 1 && models.has(opt['model-id']), `models ${[...models]}, want ${opt['model-id']}`);
  expect(usage && usage.completion_tokens > 0 && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens,
    `include_usage: last chunk's usage ${JSON.stringify(usage)}`);
  return `${chunks} chunks, ${JSON.stringify(text)}, usage ${JSON.stringify(usage)}`;
});

await check('completions.create', async () => {
  const r = await client.completions.create({ model: opt.endpoint, prompt: 'complete this' });
  expect(r.choices[0].text.includes('complete this'), `answer ${JSON.stringify(r)}`);
  expect(r.model === opt['model-id'], `model ${r.model}`);
  return JSON.stringify(r.choices[0].text);
});

await check('embeddings.create', async () => {
  // The SDK asks for base64 and decodes it into floats itself.
  const r = await client.embeddings.create({ model: opt.endpoint, input: ['alpha', 'beta', 'alpha'] });
  expect(r.data.length === 3, `${r.data.length} vectors`);
  const [a, b, a2] = r.data.map((d) => d.embedding);
  expect(a.length > 0 && a.length === b.length, `dimensions ${a.length}, ${b.length}`);
  const norm = Math.sqrt(a.reduce((s, v) => s + v * v, 0));
  expect(Math.abs(norm - 1) < 1e-5, `|alpha| = ${norm}`);
  expect(a.every((v, i) => v === a2[i]) && a.some((v, i) => v !== b[i]), 'same text, same vector; other text, other vector');
  return `3 vectors of ${a.length}, |alpha| = ${norm.toFixed(6)}`;
});

await check('wrong key -> AuthenticationError', async () => {
  const bad = new OpenAI({ baseURL: opt['base-url'], apiKey: 'hfk_wrong', maxRetries: 0 });
  try {
    await bad.chat.completions.create({ model: opt.endpoint, messages: [{ role: 'user', content: 'x' }] });
  } catch (e) {
    expect(e instanceof AuthenticationError && e.status === 401, `got ${e}`);
    return `${e.status} ${e.message}`;
  }
  throw new Error('the call succeeded');
});

await check('unknown endpoint -> NotFoundError', async () => {
  for (const call of [
    () => client.chat.completions.create({ model: 'no-such-endpoint', messages: [{ role: 'user', content: 'x' }] }),
    () => client.models.retrieve('no-such-endpoint'),
  ]) {
    try {
      await call();
      throw new Error('the call succeeded');
    } catch (e) {
      expect(e instanceof NotFoundError && e.status === 404, `got ${e}`);
    }
  }
  return '404 for chat and for models.retrieve';
});

process.exit(failed > 0 ? 1 : 0);
