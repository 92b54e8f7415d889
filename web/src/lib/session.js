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
    // The preview is CPU-heavy: for those who may change the cluster.
    preview: admin || operator,
  };
}

export const ROLES = ['admin', 'operator', 'viewer', 'agent'];

// The role as the UI shows it: the translation of a known role (roles.<role>),
// the raw role for one the UI does not know. `t` is vue-i18n's translate.
export function roleLabel(role, t) {
  if (!role) return '';
  return ROLES.includes(role) ? t(`roles.${role}`) : String(role);
}
