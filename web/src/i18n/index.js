import { createI18n } from 'vue-i18n';
import en from './en.js';
import zhCN from './zh-CN.js';
import { LANG_KEY, initialLang, otherLang } from '../lib/lang.js';

function stored() {
  try {
    return localStorage.getItem(LANG_KEY);
  } catch {
    return null;
  }
}

const lang = initialLang(stored(), typeof navigator !== 'undefined' ? navigator.language : 'en');

export const i18n = createI18n({
  legacy: false,
  locale: lang,
  fallbackLocale: 'en',
  messages: { en, 'zh-CN': zhCN },
});

function setDocumentLang(l) {
  if (typeof document !== 'undefined') document.documentElement.lang = l === 'zh-CN' ? 'zh-CN' : 'en';
}
setDocumentLang(lang);

export function toggleLang() {
  const next = otherLang(i18n.global.locale.value);
  i18n.global.locale.value = next;
  setDocumentLang(next);
  try {
    localStorage.setItem(LANG_KEY, next);
  } catch {
    /* private mode: the choice lasts for this page only */
  }
}
