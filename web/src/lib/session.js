// The session: the bearer token (sessionStorage "hf.token", never in a URL,
// never logged) and who the token belongs to (GET /api/v1/whoami), with the
// permissions the UI derives from the role (src/server/auth.h).

export const TOKEN_KEY = 'hf.token';

export function permissionsFor(role) {
  const admin = role === 'admin';
  const operator = role === 'operator';
  return {
    readOnly: !(admin || operator),
    writeConfig: admin,
    writeTasks: admin || operator,
    cordonNodes: admin || operator,
  };
}
