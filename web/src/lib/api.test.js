import { describe, it, expect, vi } from 'vitest';
import { ApiError, createApi, extractError, isMutating, query } from './api.js';

function response(status, body, statusText = '') {
  return {
    ok: status >= 200 && status < 300,
    status,
    statusText,
    headers: new Map(),
    text: async () => body,
  };
}

describe('extractError', () => {
  it('reads the API error object', () => {
    const body = JSON.stringify({ error: { code: 'conflict', message: 'binpack is enabled' } });
    expect(extractError(409, body)).toEqual({ code: 'conflict', message: 'binpack is enabled' });
  });
  it('falls back to the status for an HTML or empty body', () => {
    expect(extractError(502, '<html>bad gateway</html>', 'Bad Gateway')).toEqual({
      code: 'http_502',
      message: 'HTTP 502 Bad Gateway',
    });
    expect(extractError(500, '')).toEqual({ code: 'http_500', message: 'HTTP 500' });
  });
  it('keeps a short plain-text body', () => {
    expect(extractError(503, 'not ready')).toEqual({ code: 'http_503', message: 'not ready' });
  });
  it('names a network failure', () => {
    expect(extractError(0, '')).toEqual({ code: 'network_error', message: 'network error' });
  });
});

describe('isMutating', () => {
  it('treats GET as reading and PUT/DELETE as changing', () => {
    expect(isMutating('GET', '/api/v1/plugins')).toBe(false);
    expect(isMutating('PUT', '/api/v1/plugins/binpack')).toBe(true);
    expect(isMutating('delete', '/api/v1/tasks/3')).toBe(true);
    expect(isMutating('POST', '/api/v1/nodes/a/cordon')).toBe(true);
  });
  it('lets the preview through: it changes nothing', () => {
    expect(isMutating('POST', '/api/v1/scheduler/preview')).toBe(false);
  });
});

describe('query', () => {
  it('leaves out empty values and encodes the rest', () => {
    expect(query({ state: 'pending', after: null, name: 'a b', limit: 50 })).toBe('?state=pending&name=a%20b&limit=50');
    expect(query({})).toBe('');
  });
});

describe('createApi', () => {
  it('sends the bearer token and parses JSON', async () => {
    const fetchImpl = vi.fn(async () => response(200, '{"plugins":[]}'));
    const api = createApi({ getToken: () => 'hf_x', fetchImpl });
    expect(await api.get('/api/v1/plugins')).toEqual({ plugins: [] });
    const [url, init] = fetchImpl.mock.calls[0];
    expect(url).toBe('/api/v1/plugins');
    expect(init.headers.Authorization).toBe('Bearer hf_x');
    expect(init.method).toBe('GET');
  });
  it('throws ApiError with the code and message, and reports 401', async () => {
    const onUnauthorized = vi.fn();
    const fetchImpl = async () =>
      response(401, JSON.stringify({ error: { code: 'unauthenticated', message: 'unknown token' } }));
    const api = createApi({ getToken: () => 't', fetchImpl, onUnauthorized });
    await expect(api.get('/api/v1/nodes')).rejects.toMatchObject({
      status: 401,
      code: 'unauthenticated',
      message: 'unknown token',
    });
    expect(onUnauthorized).toHaveBeenCalledOnce();
  });
  it('never sends a mutating request for a read-only session', async () => {
    const fetchImpl = vi.fn();
    const api = createApi({ getToken: () => 't', fetchImpl, isReadOnly: () => true });
    await expect(api.put('/api/v1/plugins/binpack', { enabled: false })).rejects.toBeInstanceOf(ApiError);
    await expect(api.post('/api/v1/tasks/1/cancel')).rejects.toMatchObject({ code: 'read_only' });
    expect(fetchImpl).not.toHaveBeenCalled();
  });
  it('sends JSON bodies with a content type', async () => {
    const fetchImpl = vi.fn(async () => response(200, '{"name":"binpack"}'));
    const api = createApi({ getToken: () => 't', fetchImpl });
    await api.put('/api/v1/plugins/binpack', { weight: 2 });
    const init = fetchImpl.mock.calls[0][1];
    expect(init.body).toBe('{"weight":2}');
    expect(init.headers['Content-Type']).toBe('application/json');
  });
  it('turns a fetch failure into a network ApiError', async () => {
    const api = createApi({ fetchImpl: async () => { throw new TypeError('Failed to fetch'); } });
    await expect(api.get('/livez')).rejects.toMatchObject({ status: 0, code: 'network_error' });
  });
});
