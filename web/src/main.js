import { createApp } from 'vue';
import App from './App.vue';
import elementPlus from './element-plus.js';
import { router } from './router.js';
import { i18n } from './i18n/index.js';
import './styles.css';

createApp(App).use(i18n).use(elementPlus).use(router).mount('#app');
