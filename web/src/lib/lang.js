// The UI language: English or Simplified Chinese. The default follows
// navigator.language; a choice made with the toggle is kept in localStorage
// under "hf.lang" and wins.

export const LANGS = ['en', 'zh-CN'];
export const LANG_KEY = 'hf.lang';

export function langFromNavigator(navLang) {
  const l = String(navLang || '').toLowerCase();
  return l === 'zh' || l.startsWith('zh-') || l.startsWith('zh_') ? 'zh-CN' : 'en';
}

export function initialLang(stored, navLang) {
  if (LANGS.includes(stored)) return stored;
  return langFromNavigator(navLang);
}

export function otherLang(lang) {
  return lang === 'zh-CN' ? 'en' : 'zh-CN';
}
